import { randomBytes } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import t, { type Test } from 'tap'
import {
  build, buildLogged, call, createRun, openStream, getRun, heldAgent, listen, post, readPidFile, refused, settled, until
} from '../helpers/index.js'
import { runThrough, SURFACES } from '../helpers/surfaces.js'
import { nthOf, webhookReceiver, type Received } from '../helpers/webhook-receiver.js'

// A run's webhook through the service (src/runs/run-webhooks.ts, the dispatcher, the routes): asked for on every
// route, refused before any slot or agent when it cannot be delivered, signed, listed with the run and its deliveries.

const SECRET = `whsec_${randomBytes(32).toString('base64')}`
const WEBHOOKS = { WEBHOOK_SECRET: SECRET, WEBHOOK_ALLOW_HOSTS: '127.0.0.0/8', WEBHOOK_RETRY_BASE_MS: '50' }

interface Delivered {
  headers: Received['headers']
  body: any
}

/**
 * A receiver on loopback answering each request with the next status of `statuses`, as a receiver would after
 * verifying it with the standardwebhooks package (one that does not verify is a 400); `received`: the verified ones.
 */
async function receiver(t: Test, statuses: number[] = [204]) {
  const received: Delivered[] = []
  const { url } = await webhookReceiver(t, (request) => {
    try {
      new Webhook(SECRET).verify(request.body, request.headers as Record<string, string>)
    } catch {
      return 400
    }
    received.push({ headers: request.headers, body: JSON.parse(request.body) })
    return nthOf(statuses)(request, received.length - 1)
  })
  return { url, received }
}

const ofType = (received: Delivered[], type: string) => received.filter((each) => each.body.type === type)

t.test('a synchronous run’s run.started and run.finished, signed with the token’s secret', async (t) => {
  const app = await build(t, WEBHOOKS)
  const { url, received } = await receiver(t)
  const answer = await post(app, 'crush_run', {
    task: 'hello', webhook: { url, events: ['run.started', 'run.finished'] }
  })
  t.equal(answer.status, 200)
  await until(() => received.length, (count) => count === 2, 10_000, 'both events')
  const [started] = ofType(received, 'run.started')
  const [finished] = ofType(received, 'run.finished')
  t.match(started?.body, { data: { kind: 'sync', status: 'running', caller: 'anonymous', tool: 'crush_run' } })
  t.match(finished?.body, { data: { id: started?.body.data.id, status: 'succeeded', result: { ok: true } } })
  t.equal(answer.headers['x-run-id'], started?.body.data.id, 'the caller knows its run by the id the events carry')
  t.same(finished?.body.data.webhook, { url, events: ['run.started', 'run.finished'] }, 'listed with its webhook')
  t.not(started?.headers['webhook-id'], finished?.headers['webhook-id'], 'one id per event')
  t.match(finished?.headers['user-agent'], /^agent-runner\/\d+\.\d+\.\d+/)
  const deliveries = await until(() => call(app, 'GET', `/runs/${String(started?.body.data.id)}/deliveries`),
    (answer) => answer.body.deliveries?.every((each: any) => each.state === 'delivered'), 10_000, 'both recorded')
  t.equal(deliveries.status, 200)
  t.same(deliveries.body.deliveries.map((each: any) => [each.type, each.state, each.attempts.length]).sort(), [
    ['run.finished', 'delivered', 1], ['run.started', 'delivered', 1]
  ])
})

t.test('an async run: listed with its webhook, its run.finished the run as GET /runs/{id} answers it; ' +
  'a receiver failing twice gets three attempts of one webhook-id', async (t) => {
  const app = await build(t, WEBHOOKS)
  const { url, received } = await receiver(t, [500, 502, 200])
  const created = await createRun(app, { tool: 'crush_run', task: 'later', webhook: { url } })
  t.same(created.webhook, { url, events: ['run.finished'] }, 'the default event')
  const ended = await settled(app, created.id)
  await until(() => received.length, (count) => count === 3, 10_000, 'three attempts')
  t.same(received.map((each) => each.headers['webhook-id']), Array(3).fill(received[0]?.headers['webhook-id']))
  t.same(received[2]?.body.data, ended, 'the run as GET /runs/{id} answers it')
  t.same(received.map((each) => each.body.type), ['run.finished', 'run.finished', 'run.finished'])
  // The receiver holds the third attempt before the service has read its answer: poll for the record.
  const { body } = await until(() => call(app, 'GET', `/runs/${created.id}/deliveries`),
    (answer) => answer.body.deliveries[0]?.state === 'delivered', 10_000, 'the delivery recorded')
  t.match(body.deliveries, [{ type: 'run.finished', state: 'delivered', next_attempt_at: null }])
  t.same(body.deliveries[0].attempts.map((attempt: any) => attempt.status), [500, 502, 200])
  t.same(Object.keys(body.deliveries[0]).sort(), [
    'attempts', 'created_at', 'id', 'next_attempt_at', 'state', 'type', 'url'
  ], 'no body, no secret')
})

t.test('refused before any slot or agent: no secret for the token, a URL webhooks may not reach', async (t) => {
  const app = await build(t, { ...WEBHOOKS, MAX_CRUSH_AGENTS: '1' })
  // The only slot is held: a refusal that came after the slot would be a 429.
  const held = heldAgent(t)
  await createRun(app, { tool: 'crush_run', task: held.task })
  await readPidFile(held.pidFile)
  for (const bad of [
    'http://10.0.0.1/hook', 'http://[::ffff:169.254.169.254]:1/hook',
    'ftp://example.com/', 'http://user:pw@127.0.0.1/', 'not a url', 'http://localhost./x'
  ]) {
    const answer = await refused(app, 'crush_run', { task: 'x', webhook: { url: bad } })
    t.match(answer, { status: 400, body: { code: 'WEBHOOK_URL_NOT_ALLOWED' } }, bad)
  }
  const noSecret = await build(t, { WEBHOOK_ALLOW_HOSTS: '127.0.0.0/8' })
  t.match(await refused(noSecret, 'crush_run', { task: 'x', webhook: { url: 'http://127.0.0.1:9/' } }), {
    status: 400, body: { code: 'WEBHOOKS_NOT_CONFIGURED' }
  })
  t.match(await refused(app, 'crush_run', { task: 'x', webhook: { url: 'http://127.0.0.1:9/', events: [] } }), {
    status: 400, body: { code: 'VALIDATION_ERROR' }
  }, 'no events at all')
  held.release()
})

t.test('only the run’s caller sees its deliveries', async (t) => {
  const tokens = { API_TOKENS: 'alice:alice-secret-0123456789,bob:bob-secret-0123456789' }
  const app = await build(t, { ...WEBHOOKS, ...tokens })
  const base = await listen(t, app)
  const { url, received } = await receiver(t)
  const alice = { authorization: 'Bearer alice-secret-0123456789' }
  const created = await createRun(base, { tool: 'crush_run', task: 'mine', webhook: { url } }, alice)
  await until(() => received.length, (count) => count === 1, 10_000)
  t.equal((await call(base, 'GET', `/runs/${created.id}/deliveries`, { headers: alice })).status, 200)
  const bob = await call(base, 'GET', `/runs/${created.id}/deliveries`, {
    headers: { authorization: 'Bearer bob-secret-0123456789' }
  })
  t.match(bob, { status: 404, body: { code: 'RUN_NOT_FOUND' } })
  t.match(await getRun(base, created.id, alice), { webhook: { url } })
})

t.test('every surface takes a webhook: JSON, NDJSON, async runs and MCP tools', async (t) => {
  const app = await build(t, WEBHOOKS)
  const base = await listen(t, app)
  const { url, received } = await receiver(t)
  for (const surface of SURFACES) {
    const before = received.length
    const { result } = await runThrough(surface, base, 'crush_run', { task: `via ${surface}`, webhook: { url } })
    t.equal(result.ok, true, surface)
    await until(() => received.length, (count) => count === before + 1, 10_000, `${surface}'s run.finished`)
    t.match(received.at(-1)?.body, { type: 'run.finished', data: { status: 'succeeded', task: `via ${surface}` } })
  }
})

t.test('a failed attempt is logged with its run, never with the secret; /metrics counts attempts and pending ones',
  async (t) => {
    const { app, lines } = await buildLogged(t, { ...WEBHOOKS, WEBHOOK_RETRY_BASE_MS: '60000' })
    const { url, received } = await receiver(t, [503])
    const created = await createRun(app, {
      tool: 'crush_run', task: 'x', webhook: { url: `${url}?token=receivers-own-token` }
    })
    await until(() => received.length, (count) => count === 1, 10_000)
    const failure = await until(
      () => lines.find((line) => line.includes('webhook attempt failed')), (line) => line !== undefined, 5000
    )
    t.match(JSON.parse(failure!), { run: created.id, status: 503, host: new URL(url).host, attempts: 1 })
    const logged = lines.join('')
    t.notOk(logged.includes(SECRET.slice('whsec_'.length)), 'the secret is in no log line')
    t.notOk(logged.includes('receivers-own-token'), 'nor the URL’s query')
    const metrics = (await app.inject('/metrics')).body
    t.match(metrics, /^agent_runner_webhook_deliveries_total\{outcome="failed"\} 1$/m)
    t.match(metrics, /^agent_runner_webhook_deliveries_pending 1$/m, 'due again in a minute')
  })

t.test('a streamed run names its run in x-run-id as its stream opens: the id its webhook events carry', async (t) => {
  const app = await build(t, WEBHOOKS)
  const base = await listen(t, app)
  const { url, received } = await receiver(t)
  const response = await openStream(base, 'crush_run', { task: 'streamed', webhook: { url } })
  t.equal(response.status, 200)
  const id = response.headers.get('x-run-id')
  await response.text()
  await until(() => received.length, (count) => count === 1, 10_000)
  t.equal(received[0]?.body.data.id, id)
  t.match(received[0]?.body.data, { kind: 'stream', status: 'succeeded' })
})

import { randomBytes, randomUUID } from 'node:crypto'
import pino from 'pino'
import { Webhook } from 'standardwebhooks'
import t, { type Test } from 'tap'
import { MemoryOutbox } from '#src/runs/stores/memory-outbox.js'
import { parseAllowList } from '#src/webhooks/address-policy.js'
import { WebhookDispatcher, type AttemptVerdict } from '#src/webhooks/dispatcher.js'
import { eventBody } from '#src/webhooks/events.js'
import type { WebhookDelivery, WebhookOutbox } from '#src/webhooks/outbox.js'
import { parseWebhookSecrets } from '#src/webhooks/secrets.js'
import { until } from '../helpers/index.js'
import { nthOf, webhookReceiver } from '../helpers/webhook-receiver.js'

// The dispatcher against real receivers on loopback: retries with one webhook-id, 410, giving up, a receiver that
// never answers beside one that does, a lost run's end (src/webhooks/dispatcher.ts).

const SECRET = `whsec_${randomBytes(32).toString('base64')}`
const log = pino({ level: 'silent' })

/** A receiver answering each request with the next status of `statuses`; `hang`: never answering at all. */
const receiver = async (t: Test, statuses: number[], hang = false) =>
  webhookReceiver(t, hang ? () => null : nthOf(statuses))

function dispatcher(
  t: Test, outbox: WebhookOutbox, overrides: { retryForMs?: number; secrets?: string; maxInFlight?: number } = {}
) {
  const verdicts: AttemptVerdict[] = []
  const dispatching = new WebhookDispatcher({
    outbox,
    settings: {
      secrets: parseWebhookSecrets(overrides.secrets ?? SECRET, []),
      allow: parseAllowList(['127.0.0.0/8']),
      retryBaseMs: 30,
      retryForMs: overrides.retryForMs ?? 60_000
    },
    replica: 'replica-a',
    userAgent: 'agent-runner/test',
    log,
    attempted: (verdict) => verdicts.push(verdict),
    pollMs: 20,
    attemptTimeoutMs: 2000,
    maxInFlight: overrides.maxInFlight
  })
  dispatching.start()
  t.teardown(() => dispatching.close())
  return { dispatching, verdicts }
}

const delivery = (url: string, overrides: Partial<WebhookDelivery> = {}): WebhookDelivery => ({
  id: `msg_${randomUUID()}`,
  run: randomUUID(),
  caller: 'studio',
  type: 'run.finished',
  url,
  body: eventBody('run.finished', new Date(), { id: 'r', status: 'succeeded' }),
  createdAt: new Date().toISOString(),
  replica: 'replica-a',
  state: 'pending',
  attempts: [],
  nextAttemptAt: new Date().toISOString(),
  ...overrides
})

const stateOf = async (outbox: WebhookOutbox, run: string) => (await outbox.deliveriesOf(run))[0]

t.test('a receiver failing twice then answering gets three attempts of one webhook-id, each signed anew',
  async (t) => {
    const outbox = new MemoryOutbox(60_000)
    const { url, received } = await receiver(t, [500, 503, 204])
    const { verdicts } = dispatcher(t, outbox)
    const sent = delivery(url)
    await outbox.addDeliveries([sent])
    const done = await until(() => stateOf(outbox, sent.run), (found) => found?.state === 'delivered', 10_000)
    t.same(done?.attempts.map((attempt) => attempt.status), [500, 503, 204])
    t.same(received.map((request) => request.headers['webhook-id']), [sent.id, sent.id, sent.id])
    for (const { body, headers } of received) {
      t.same(new Webhook(SECRET).verify(body, headers as Record<string, string>), JSON.parse(sent.body))
    }
    t.equal(received[0]?.headers['user-agent'], 'agent-runner/test')
    t.same(verdicts, ['failed', 'failed', 'delivered'])
    t.ok(Date.parse(done!.attempts[2]!.at) - Date.parse(done!.attempts[1]!.at) >= 0.8 * 60,
      'the second retry waited about twice the base')
  })

t.test('410 Gone ends the delivery at once; past WEBHOOK_RETRY_FOR_MS it is given up', async (t) => {
  const outbox = new MemoryOutbox(60_000)
  const gone = await receiver(t, [410])
  const failing = await receiver(t, [500])
  const { verdicts } = dispatcher(t, outbox, { retryForMs: 200 })
  const [first, second] = [delivery(gone.url), delivery(failing.url)]
  await outbox.addDeliveries([first, second])
  t.match(await until(() => stateOf(outbox, first.run), (found) => found?.state === 'gone'), {
    attempts: [{ status: 410 }]
  })
  const givenUp = await until(() => stateOf(outbox, second.run), (found) => found?.state === 'given_up', 10_000)
  // Retried while the next attempt (30 ms, doubling, each ±20 %) fell within the 200 ms, given up once it could not:
  // how many attempts that makes is the machine's pace (an early first failure is retried, a late one is not).
  const since = givenUp!.attempts.map((attempt) => Date.parse(attempt.at) - Date.parse(second.createdAt))
  const delay = (failed: number, share: number) => Math.round(30 * 2 ** (failed - 1) * share)
  t.ok(since.slice(0, -1).every((at, index) => at + delay(index + 1, 0.8) <= 200),
    `retried in time: attempts ${since.join(', ')} ms after the event`)
  t.ok(since.at(-1)! + delay(since.length, 1.2) > 200, 'given up only once no retry could come within 200 ms')
  t.equal(gone.received.length, 1, 'never retried after 410')
  t.ok(verdicts.includes('gone') && verdicts.includes('given_up'))
  t.equal(await outbox.pendingDeliveries(), 0)
})

t.test('a receiver that never answers holds its attempt alone: another is delivered meanwhile', async (t) => {
  const outbox = new MemoryOutbox(60_000)
  const silent = await receiver(t, [200], true)
  const prompt = await receiver(t, [200])
  dispatcher(t, outbox)
  const [stuck, quick] = [delivery(silent.url), delivery(prompt.url)]
  await outbox.addDeliveries([stuck, quick])
  await until(() => stateOf(outbox, quick.run), (found) => found?.state === 'delivered')
  t.equal((await stateOf(outbox, stuck.run))?.attempts.length, 0, 'the silent one is still on its first attempt')
  const retried = await until(() => stateOf(outbox, stuck.run), (found) => (found?.attempts.length ?? 0) > 0, 5000)
  t.match(retried?.attempts[0], { status: null, error: /no answer within 2000 ms/ })
})

t.test('an attempt answered 2xx whose receiver trickles the rest holds its place in flight until its socket closes',
  async (t) => {
    const outbox = new MemoryOutbox(60_000)
    const events: string[] = []
    const trickling = await webhookReceiver(t, () => (response) => {
      response.writeHead(200)
      const ticking = setInterval(() => response.write('x'), 50)
      response.on('close', () => {
        clearInterval(ticking)
        events.push('the trickling receiver’s socket closed')
      })
    })
    const prompt = await webhookReceiver(t, () => {
      events.push('the next delivery sent')
      return 200
    })
    dispatcher(t, outbox, { maxInFlight: 1 })
    const first = delivery(trickling.url)
    await outbox.addDeliveries([first])
    await until(() => trickling.received.length, (count) => count === 1, 10_000, 'the first attempt')
    const next = delivery(prompt.url)
    await outbox.addDeliveries([next])
    await until(() => stateOf(outbox, next.run), (found) => found?.state === 'delivered', 10_000, 'the next one')
    t.same(events, ['the trickling receiver’s socket closed', 'the next delivery sent'], 'one socket in flight at most')
    t.match(await stateOf(outbox, first.run), { state: 'delivered', attempts: [{ status: 200 }] })
  })

t.test('a token without a secret any more: the delivery is given up, nothing sent', async (t) => {
  const outbox = new MemoryOutbox(60_000)
  const { url, received } = await receiver(t, [200])
  dispatcher(t, outbox, { secrets: '' })
  const orphaned = delivery(url)
  await outbox.addDeliveries([orphaned])
  const ended = await until(() => stateOf(outbox, orphaned.run), (found) => found?.state === 'given_up')
  t.match(ended?.attempts, [{ status: null, error: /no webhook secret/ }])
  t.equal(received.length, 0)
})

t.test('an armed run.finished whose replica died is delivered as the run’s lost end', async (t) => {
  /** A store in which every armed delivery's replica is gone. */
  class DeadReplicas extends MemoryOutbox {
    override async orphanedDeliveries() {
      return (await this.deliveriesOf(run)).filter((each) => each.state === 'armed')
    }
  }
  const run = randomUUID()
  const outbox = new DeadReplicas(60_000)
  const { url, received } = await receiver(t, [200])
  dispatcher(t, outbox)
  const atStart = eventBody('run.finished', new Date(), { id: run, status: 'running', result: null, kind: 'sync' })
  await outbox.addDeliveries([delivery(url, { run, state: 'armed', nextAttemptAt: null, body: atStart })])
  await until(() => stateOf(outbox, run), (found) => found?.state === 'delivered')
  const body = JSON.parse(received[0]!.body)
  t.match(body, { type: 'run.finished', data: { id: run, status: 'lost', kind: 'sync', result: null } })
  t.equal(body.data.finished_at, body.timestamp, 'ended when the loss was found')
})

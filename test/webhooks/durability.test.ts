import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { join } from 'node:path'
import { Webhook } from 'standardwebhooks'
import t, { type Test } from 'tap'
import {
  call, createRun, isAlive, readPidFile, scenario, settled, startServer, tempDir, until, type Started
} from '../helpers/index.js'
import { NO_REDIS, redisEnv, startRedis } from '../helpers/redis.js'
import { webhookReceiver } from '../helpers/webhook-receiver.js'

// What no restart, crash or dead replica loses: deliveries wait in the run store (SQLite, Redis) and the next life,
// or another replica, sends them; a run whose service died mid-run is delivered as `lost`.

const SECRET = `whsec_${randomBytes(32).toString('base64')}`
const WEBHOOKS = { WEBHOOK_SECRET: SECRET, WEBHOOK_ALLOW_HOSTS: '127.0.0.0/8', WEBHOOK_RETRY_BASE_MS: '100' }

/** A receiver on loopback whose answer the test sets as it goes; `received`: each delivery, verified. */
async function receiver(t: Test) {
  const received: Array<{ id: string; body: any }> = []
  const control = { status: 503 }
  const { url } = await webhookReceiver(t, (request) => {
    const body = new Webhook(SECRET).verify(request.body, request.headers as Record<string, string>)
    received.push({ id: String(request.headers['webhook-id']), body })
    return control.status
  })
  return { url, received, control }
}

async function kill(server: Started): Promise<void> {
  const exited = once(server.child, 'exit')
  server.child.kill('SIGKILL')
  await exited
}

t.jobs = 2

t.test('SQLite: a delivery pending when the service is SIGKILLed is delivered by the next start', async (t) => {
  const dataDir = tempDir(t)
  const hook = await receiver(t)
  const first = await startServer(t, { ...WEBHOOKS, DATA_DIR: dataDir })
  const { id } = await createRun(first.base, { tool: 'crush_run', task: 'hello', webhook: { url: hook.url } })
  await settled(first.base, id)
  // Refused at least once: pending in the outbox, retried every 100 ms or so.
  await until(() => hook.received.length, (count) => count >= 1, 10_000, 'a first attempt')
  await kill(first)
  const failed = hook.received.length
  hook.control.status = 200
  const second = await startServer(t, { ...WEBHOOKS, DATA_DIR: dataDir })
  await until(() => hook.received.length, (count) => count > failed, 10_000, 'an attempt by the next life')
  const ids = new Set(hook.received.map((each) => each.id))
  t.equal(ids.size, 1, 'the same webhook-id across lives')
  t.match(hook.received.at(-1)?.body, { type: 'run.finished', data: { id, status: 'succeeded' } })
  const { body } = await call(second.base, 'GET', `/runs/${id}/deliveries`)
  const delivered = await until(
    async () => (await call(second.base, 'GET', `/runs/${id}/deliveries`)).body.deliveries[0],
    (delivery) => delivery?.state === 'delivered', 5000, 'recorded delivered'
  )
  // An attempt the first life made just before its kill may not have been recorded: it counts, if at all, once.
  t.match(delivered.attempts.at(-1), { status: 200 }, 'the next life’s attempt, recorded')
  t.equal(body.deliveries.length, 1)
})

t.test('SQLite: a run whose service was SIGKILLed mid-run is delivered as lost by the next start', async (t) => {
  const dataDir = tempDir(t)
  const hook = await receiver(t)
  hook.control.status = 200
  const pidFile = join(tempDir(t), 'agent.pid')
  const first = await startServer(t, { ...WEBHOOKS, DATA_DIR: dataDir })
  const { id } = await createRun(first.base, {
    tool: 'crush_run', task: scenario.writePid(pidFile, 600_000), webhook: { url: hook.url }
  })
  await readPidFile(pidFile)
  await kill(first)
  t.equal(hook.received.length, 0, 'nothing yet: the run had not ended')
  const second = await startServer(t, { ...WEBHOOKS, DATA_DIR: dataDir })
  await until(() => hook.received.length, (count) => count === 1, 10_000, 'the lost run’s end')
  t.match(hook.received[0]?.body, { type: 'run.finished', data: { id, status: 'lost', result: null, kind: 'async' } })
  t.match((await call(second.base, 'GET', `/runs/${id}`)).body, { status: 'lost' }, 'as the store says of it')
})

t.test('Redis: the replica running the run is SIGKILLed; another delivers its end, once', { skip: NO_REDIS },
  async (t) => {
    const { url } = await startRedis(t)
    const env = redisEnv(url, { ...WEBHOOKS, SLOTS_TTL_MS: '1000' })
    const hook = await receiver(t)
    hook.control.status = 200
    const [a, b] = await Promise.all([startServer(t, env), startServer(t, env)])
    const pidFile = join(tempDir(t), 'agent.pid')
    const { id } = await createRun(a.base, {
      tool: 'crush_run', task: scenario.writePid(pidFile, 600_000), webhook: { url: hook.url }
    })
    const agent = await readPidFile(pidFile)
    // No later life of A comes to stop what it left.
    t.teardown(() => isAlive(agent) && process.kill(-agent, 'SIGKILL'))
    await kill(a)
    await until(() => hook.received.length, (count) => count >= 1, 15_000, 'the end, from B')
    t.match(hook.received[0]?.body, { type: 'run.finished', data: { id, status: 'lost' } })
    const deliveries = await call(b.base, 'GET', `/runs/${id}/deliveries`)
    t.match(deliveries.body.deliveries, [{ type: 'run.finished', state: 'delivered' }])
    t.equal(hook.received.length, 1, 'delivered once')
  })

t.test('Redis: two replicas, one due delivery: each attempt is made by one of them', { skip: NO_REDIS }, async (t) => {
  const { url } = await startRedis(t)
  const env = redisEnv(url, { ...WEBHOOKS })
  const hook = await receiver(t)
  const [a] = await Promise.all([startServer(t, env), startServer(t, env)])
  const { id } = await createRun(a.base, { tool: 'crush_run', task: 'hello', webhook: { url: hook.url } })
  await settled(a.base, id)
  await until(() => hook.received.length, (count) => count >= 4, 15_000, 'a few failed attempts')
  hook.control.status = 200
  const delivered = await until(
    async () => (await call(a.base, 'GET', `/runs/${id}/deliveries`)).body.deliveries[0],
    (delivery) => delivery?.state === 'delivered', 15_000, 'delivered'
  )
  t.equal(hook.received.length, delivered.attempts.length, 'the receiver saw each recorded attempt once: none twice')
})

import type BetterSqlite3 from 'better-sqlite3'
import { Redis } from 'ioredis'
import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import pino from 'pino'
import t, { type Test } from 'tap'
import { MemoryRunStore } from '#src/runs/stores/memory-store.js'
import { RedisRunStore } from '#src/runs/stores/redis-store.js'
import type { RetentionOptions, RunStore } from '#src/runs/stores/run-store.js'
import { SqliteRunStore } from '#src/runs/stores/sqlite-store.js'
import { TIMEOUT_MAX_SECONDS } from '#src/schemas/run.js'
import type { DeliveryAttempt, WebhookDelivery } from '#src/webhooks/outbox.js'
import { MAX_RETRY_DELAY_MS } from '#src/webhooks/schedule.js'
import { tempDir } from '../helpers/index.js'
import { NO_REDIS, redisEnv, startRedis } from '../helpers/redis.js'

// One contract, every store: the webhook deliveries a run store keeps beside its runs (src/webhooks/outbox.ts).

const REPLICA = 'replica-under-test'
const log = pino({ level: 'silent' })
const RETENTION: RetentionOptions = {
  retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100
}

type Open = (t: Test) => Promise<RunStore>

const stores: Record<string, Open> = {
  memory: async (t) => {
    const store = new MemoryRunStore(RETENTION)
    t.teardown(() => store.close())
    return store
  },
  sqlite: async (t) => {
    const store = new SqliteRunStore(tempDir(t), RETENTION, REPLICA)
    t.teardown(() => store.close())
    return store
  }
}
if (NO_REDIS === false) {
  stores['redis'] = async (t) => {
    const { url } = await startRedis(t)
    const store = await redisStore(t, url, redisEnv(url).SLOTS_KEY_PREFIX, REPLICA)
    return store
  }
}

/** A replica on a Redis of its own, a run's deliveries added, and a client to look at what it wrote. */
async function withARun(t: Test) {
  const { url } = await startRedis(t)
  const prefix = redisEnv(url).SLOTS_KEY_PREFIX
  const { outbox } = await redisStore(t, url, prefix, REPLICA)
  const redis = new Redis(url)
  t.teardown(() => redis.disconnect())
  const [started, finished] = deliveriesOf()
  await outbox.addDeliveries([started, finished])
  return { outbox, prefix, redis, started, finished }
}

/** A replica of a fleet on this Redis: alive (its heartbeat key set) once this resolves. */
async function redisStore(t: Test, url: string, keyPrefix: string, replica: string): Promise<RedisRunStore> {
  const store = new RedisRunStore({ ...RETENTION, url, keyPrefix, ttlMs: 10_000, timeoutMs: 5000, replica, log })
  await store.recover()
  t.teardown(() => store.close())
  return store
}

const at = (secondsFromNow: number): string => new Date(Date.now() + secondsFromNow * 1000).toISOString()

/** A run's two deliveries as its agent starts: run.started due now, run.finished armed. */
function deliveriesOf(run = randomUUID(), replica = REPLICA): [WebhookDelivery, WebhookDelivery] {
  const common = {
    run, caller: 'alice', url: 'https://hooks.example.com/agent-runner', replica, attempts: []
  }
  const started = { type: 'run.started', body: '{"type":"run.started"}', createdAt: at(0) } as const
  const finished = { type: 'run.finished', body: '{"data":{"status":"running"}}', createdAt: at(0.001) } as const
  return [
    { ...common, ...started, id: `msg_${randomUUID()}`, state: 'pending', nextAttemptAt: at(0) },
    { ...common, ...finished, id: `msg_${randomUUID()}`, state: 'armed', nextAttemptAt: null }
  ]
}

const attempt = (status: number | null, when = new Date()): DeliveryAttempt => ({
  at: when.toISOString(), status, error: status === null ? 'ECONNREFUSED' : null, durationMs: 3
})

const idsOf = (deliveries: WebhookDelivery[]): string[] => deliveries.map((delivery) => delivery.id)

for (const [kind, open] of Object.entries(stores)) {
  t.test(kind, async (t) => {
    t.test('a run’s run.started is due at once, its run.finished once its run ends', async (t) => {
      const { outbox } = await open(t)
      const [started, finished] = deliveriesOf()
      await outbox.addDeliveries([started, finished])
      t.same((await outbox.dueDeliveries(new Date(), 10)).map((due) => due.id), [started.id], 'only run.started')
      t.equal(await outbox.pendingDeliveries(), 1)
      await outbox.fireDelivery(finished.id, '{"data":{"status":"succeeded"}}', new Date())
      const due = await outbox.dueDeliveries(new Date(), 10)
      t.same(due.map((each) => each.id), [started.id, finished.id], 'both, the oldest first')
      t.match(due[1], { state: 'pending', body: '{"data":{"status":"succeeded"}}', type: 'run.finished' })
      await outbox.fireDelivery(finished.id, '{"fired":"twice"}', new Date())
      t.equal((await outbox.deliveriesOf(finished.run))[1]?.body, '{"data":{"status":"succeeded"}}',
        'a delivery no longer armed is not fired again')
      t.same(await outbox.dueDeliveries(new Date(), 1), [due[0]], 'at most max')
    })

    t.test('an A2A push keeps its form: its receiver’s headers, its config, its lost end', async (t) => {
      const { outbox } = await open(t)
      const [started, finished] = deliveriesOf()
      const push = { config: 'cfg-1', headers: { 'x-a2a-notification-token': 'tok' } }
      await outbox.addDeliveries([
        { ...started, push: { ...push, lostBody: null } },
        { ...finished, push: { ...push, lostBody: '{"task":{"status":{"state":"TASK_STATE_FAILED"}}}' } }
      ])
      const kept = await outbox.deliveriesOf(started.run)
      t.same(kept.map((each) => each.push), [
        { ...push, lostBody: null }, { ...push, lostBody: '{"task":{"status":{"state":"TASK_STATE_FAILED"}}}' }
      ])
      t.same((await outbox.dueDeliveries(new Date(), 10))[0]?.push, { ...push, lostBody: null }, 'as it is due')
      const [plain] = deliveriesOf()
      await outbox.addDeliveries([plain])
      t.notOk('push' in (await outbox.deliveriesOf(plain.run))[0]!, 'a Standard Webhooks event has none')
    })

    t.test('a dropped delivery is gone, pending or armed; an ended one stays as it ended', async (t) => {
      const { outbox } = await open(t)
      const [started, finished] = deliveriesOf()
      const [done] = deliveriesOf(started.run as ReturnType<typeof randomUUID>)
      await outbox.addDeliveries([started, finished, done])
      await outbox.recordAttempt(done.id, attempt(200), { state: 'delivered', nextAttemptAt: null })
      for (const each of [started, finished, done]) await outbox.dropDelivery(each.id)
      const states = new Map((await outbox.deliveriesOf(started.run)).map((each) => [each.id, each.state]))
      t.same([states.get(started.id), states.get(finished.id), states.get(done.id)], ['gone', 'gone', 'delivered'])
      t.same(await outbox.dueDeliveries(new Date(), 10), [], 'nothing of it due')
      t.same(await outbox.orphanedDeliveries(), [], 'nor armed')
      await outbox.fireDelivery(finished.id, '{"late":true}', new Date())
      t.same(await outbox.dueDeliveries(new Date(), 10), [], 'a dropped end is not fired by its run’s end')
    })

    t.test('one attempt at a time: a claim holds the delivery until its attempt is recorded', async (t) => {
      const { outbox } = await open(t)
      const [started] = deliveriesOf()
      await outbox.addDeliveries([started])
      t.equal(await outbox.claimDelivery(started.id, 'a', 60_000), true)
      t.equal(await outbox.claimDelivery(started.id, 'b', 60_000), false, 'not while another holds it')
      await outbox.recordAttempt(started.id, attempt(503), { state: 'pending', nextAttemptAt: at(30) })
      t.equal(await outbox.claimDelivery(started.id, 'b', 60_000), true, 'released by the recorded attempt')
    })

    t.test('a claim given back unused frees the delivery; only its holder gives it back', async (t) => {
      const { outbox } = await open(t)
      const [started] = deliveriesOf()
      await outbox.addDeliveries([started])
      t.equal(await outbox.claimDelivery(started.id, 'a', 60_000), true)
      await outbox.releaseDelivery(started.id, 'b')
      t.equal(await outbox.claimDelivery(started.id, 'b', 60_000), false, 'not by another')
      await outbox.releaseDelivery(started.id, 'a')
      t.equal(await outbox.claimDelivery(started.id, 'b', 60_000), true, 'by its holder')
    })

    t.test('a claim lapses: a holder that died does not hold the delivery for good', async (t) => {
      const { outbox } = await open(t)
      const [started] = deliveriesOf()
      await outbox.addDeliveries([started])
      t.equal(await outbox.claimDelivery(started.id, 'dead', 1), true)
      const lapsed = Date.now() + 50
      while (Date.now() < lapsed) await new Promise((resolve) => setTimeout(resolve, 10))
      t.equal(await outbox.claimDelivery(started.id, 'alive', 60_000), true)
    })

    t.test('attempts are kept in order; a failed one is due again later, an ended one never', async (t) => {
      const { outbox } = await open(t)
      const [started, finished] = deliveriesOf()
      const [other] = deliveriesOf()
      await outbox.addDeliveries([started, finished, other])
      await outbox.recordAttempt(started.id, attempt(null), { state: 'pending', nextAttemptAt: at(30) })
      t.same((await outbox.dueDeliveries(new Date(), 10)).map((due) => due.id), [other.id], 'not before its time')
      t.same((await outbox.dueDeliveries(new Date(Date.now() + 31_000), 10)).map((due) => due.id), [
        other.id, started.id
      ], 'the most overdue first')
      await outbox.recordAttempt(started.id, attempt(200), { state: 'delivered', nextAttemptAt: null })
      t.same((await outbox.dueDeliveries(new Date(Date.now() + 3_600_000), 10)).map((due) => due.id), [other.id])
      const [kept, armed] = await outbox.deliveriesOf(started.run)
      t.match(kept, { id: started.id, state: 'delivered', nextAttemptAt: null })
      t.same(kept?.attempts.map((each) => each.status), [null, 200])
      t.match(kept?.attempts[0], { error: 'ECONNREFUSED', durationMs: 3 })
      t.match(armed, { id: finished.id, state: 'armed' })
      t.equal(await outbox.pendingDeliveries(), 1, 'the other run’s')
      t.same(await outbox.deliveriesOf(randomUUID()), [], 'none for an unknown run')
    })

    t.test('a live replica’s armed deliveries are no orphans', async (t) => {
      const { outbox } = await open(t)
      await outbox.addDeliveries(deliveriesOf())
      t.same(await outbox.orphanedDeliveries(), [])
    })

    t.test('due at the same moment: the earlier event first', async (t) => {
      const { outbox } = await open(t)
      const [earlier] = deliveriesOf()
      const [later] = deliveriesOf()
      const due = at(-1)
      // Their ids in the other order: what breaks the tie is when they were made.
      await outbox.addDeliveries([
        { ...earlier, id: `msg_z${randomUUID()}`, createdAt: at(-2), nextAttemptAt: due },
        { ...later, id: `msg_a${randomUUID()}`, createdAt: at(-1.5), nextAttemptAt: due }
      ])
      t.same((await outbox.dueDeliveries(new Date(), 10)).map((each) => each.run), [earlier.run, later.run])
    })

    t.test('attempts recorded at once are all kept (a claim that lapsed mid-attempt)', async (t) => {
      const { outbox } = await open(t)
      const [started] = deliveriesOf()
      await outbox.addDeliveries([started])
      const statuses = [500, 502, 503, 504]
      await Promise.all(statuses.map((status) =>
        outbox.recordAttempt(started.id, attempt(status), { state: 'pending', nextAttemptAt: at(30) })))
      const [kept] = await outbox.deliveriesOf(started.run)
      t.same(kept?.attempts.map((each) => each.status).sort(), statuses, 'none overwritten by another')
    })

    t.test('an ended delivery is kept as long as finished runs are, from its last attempt', async (t) => {
      const { outbox } = await open(t)
      const [old] = deliveriesOf()
      const [recent] = deliveriesOf()
      const [stillPending] = deliveriesOf()
      await outbox.addDeliveries([old, recent, stillPending])
      const longAgo = new Date(Date.now() - RETENTION.retentionMs - 60_000)
      await outbox.recordAttempt(old.id, attempt(200, longAgo), { state: 'delivered', nextAttemptAt: null })
      const within = new Date(Date.now() - RETENTION.retentionMs / 2)
      await outbox.recordAttempt(recent.id, attempt(410, within), { state: 'gone', nextAttemptAt: null })
      await outbox.recordAttempt(stillPending.id, attempt(500, longAgo), { state: 'pending', nextAttemptAt: at(0) })
      // What the memory and SQLite stores prune on: the next run's deliveries.
      await outbox.addDeliveries(deliveriesOf())
      t.same(await outbox.deliveriesOf(old.run), [], 'past retention: forgotten')
      t.match(await outbox.deliveriesOf(recent.run), [{ id: recent.id, state: 'gone' }], 'within retention: kept')
      t.match(await outbox.deliveriesOf(stillPending.run), [{ id: stillPending.id, state: 'pending' }],
        'a pending one is kept whenever its last attempt was')
    })
  })
}

t.test('sqlite: a later life delivers what an earlier one left pending, ' +
  'and fires as lost what it left armed', async (t) => {
  const dir = tempDir(t)
  const earlier = new SqliteRunStore(dir, RETENTION, 'earlier-life')
  const [started, finished] = deliveriesOf(randomUUID(), 'earlier-life')
  await earlier.outbox.addDeliveries([started, finished])
  t.equal(await earlier.outbox.claimDelivery(started.id, 'earlier-life', 60_000), true)
  t.same(await earlier.outbox.orphanedDeliveries(), [], 'its own run may still end')
  await earlier.close()
  const later = new SqliteRunStore(dir, RETENTION, 'later-life')
  t.teardown(() => later.close())
  const [ownStarted, ownFinished] = deliveriesOf(randomUUID(), 'later-life')
  await later.outbox.addDeliveries([ownStarted, ownFinished])
  t.same(idsOf(await later.outbox.dueDeliveries(new Date(), 10)).sort(), [started.id, ownStarted.id].sort(),
    'still due')
  t.equal(await later.outbox.claimDelivery(started.id, 'later-life', 60_000), true, 'claims died with their life')
  t.same(await later.outbox.orphanedDeliveries(), [finished], 'the earlier life’s armed one, whole; not its own')
  t.equal(await later.outbox.pendingDeliveries(), 2)
})

t.test('sqlite: the polls read due and armed deliveries, and pruning ended ones, ' +
  'through indexes, not the whole table', async (t) => {
  const dir = tempDir(t)
  await new SqliteRunStore(dir, RETENTION, REPLICA).close()
  const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3
  const db = new Database(join(dir, 'runs.sqlite'), { readonly: true })
  t.teardown(() => db.close())
  const plan = (sql: string, ...values: unknown[]) => (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...values) as Array<{
    detail: string
  }>).map((step) => step.detail).join('\n')
  const now = new Date().toISOString()
  const due = plan("SELECT * FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= ? " +
    'ORDER BY next_attempt_at, created_at LIMIT 10', now)
  t.match(due, /USING INDEX webhook_deliveries_due/)
  t.notMatch(due, /TEMP B-TREE/, 'in order, without sorting')
  t.match(plan("SELECT * FROM webhook_deliveries WHERE state = 'armed' AND replica != ?", REPLICA),
    /USING INDEX webhook_deliveries_due/)
  t.match(plan('SELECT * FROM webhook_deliveries WHERE run = ? ORDER BY created_at', 'run'),
    /USING INDEX webhook_deliveries_by_run/)
  t.match(plan('DELETE FROM webhook_deliveries WHERE ended_at < ?', now),
    /USING (COVERING )?INDEX webhook_deliveries_ended/)
})

t.test('redis: a fleet’s replicas share the deliveries; one attempt at a time; ' +
  'a dead replica’s armed deliveries are the others’ orphans', { skip: NO_REDIS }, async (t) => {
  const { url } = await startRedis(t)
  const prefix = redisEnv(url).SLOTS_KEY_PREFIX
  const a = await redisStore(t, url, prefix, 'a')
  const b = await redisStore(t, url, prefix, 'b')
  const [startedOfA, finishedOfA] = deliveriesOf(randomUUID(), 'a')
  const [startedOfB, finishedOfB] = deliveriesOf(randomUUID(), 'b')
  await a.outbox.addDeliveries([startedOfA, finishedOfA])
  await b.outbox.addDeliveries([startedOfB, finishedOfB])
  for (const replica of [a, b]) {
    t.same(idsOf(await replica.outbox.dueDeliveries(new Date(), 10)).sort(), [startedOfA.id, startedOfB.id].sort(),
      'each sees all')
    t.equal(await replica.outbox.pendingDeliveries(), 2)
    t.same(await replica.outbox.orphanedDeliveries(), [], 'both alive: no orphans')
  }
  t.equal(await b.outbox.claimDelivery(startedOfA.id, 'b', 60_000), true)
  t.equal(await a.outbox.claimDelivery(startedOfA.id, 'a', 60_000), false, 'held by the other replica')
  t.equal(await b.outbox.claimDelivery(startedOfA.id, 'b', 60_000), false, 'one attempt at a time, even its own')
  await b.outbox.recordAttempt(startedOfA.id, attempt(200), { state: 'delivered', nextAttemptAt: null })
  t.match(await a.outbox.deliveriesOf(startedOfA.run), [{ state: 'delivered', attempts: [{ status: 200 }] }],
    'what one replica did, the other sees')
  await a.close()
  t.same(await b.outbox.orphanedDeliveries(), [finishedOfA], 'its replica left: its armed delivery, whole')
  await b.outbox.fireDelivery(finishedOfA.id, '{"data":{"status":"lost"}}', new Date())
  t.same(await b.outbox.orphanedDeliveries(), [], 'fired once')
  t.same(idsOf(await b.outbox.dueDeliveries(new Date(), 10)), [startedOfB.id, finishedOfA.id])
})

t.test('redis: every key expires, an armed or pending delivery’s past the longest run and wait between attempts, ' +
  'an ended one’s its retention after its last attempt', { skip: NO_REDIS }, async (t) => {
  const { outbox, prefix, redis, started, finished } = await withARun(t)
  await outbox.claimDelivery(started.id, REPLICA, 60_000)
  const keep = (TIMEOUT_MAX_SECONDS * 1000 + RETENTION.retentionMs + MAX_RETRY_DELAY_MS)
  const ttls = async () => {
    const keys = (await redis.keys(`${prefix}webhook*`)).sort()
    return Object.fromEntries(await Promise.all(keys.map(async (key) =>
      [key.slice(prefix.length), await redis.pttl(key)] as const)))
  }
  const armed = await ttls()
  t.same(Object.keys(armed), [
    `webhook:${finished.id}`, `webhook:${started.id}`, `webhook:${started.id}:claim`, 'webhooks:armed',
    'webhooks:due', `webhooks:run:${started.run}`
  ].sort())
  for (const [key, ttl] of Object.entries(armed)) {
    if (key.endsWith(':claim')) t.ok(ttl > 50_000 && ttl <= 60_000, `the claim's own: ${key} ${ttl}`)
    else t.ok(ttl > keep - 60_000 && ttl <= keep, `${key}: ${ttl} ms`)
  }
  const halfAgo = new Date(Date.now() - RETENTION.retentionMs / 2)
  await outbox.recordAttempt(started.id, attempt(200, halfAgo), { state: 'delivered', nextAttemptAt: null })
  await outbox.fireDelivery(finished.id, '{}', new Date())
  const ended = await ttls()
  t.notOk(`webhook:${started.id}:claim` in ended, 'the claim released')
  t.ok(ended[`webhook:${finished.id}`]! > keep - 60_000, 'fired: pending, kept as long again')
  const left = RETENTION.retentionMs / 2
  t.ok(ended[`webhook:${started.id}`]! > left - 10_000 && ended[`webhook:${started.id}`]! <= left,
    `delivered: its retention from its last attempt (${ended[`webhook:${started.id}`]} ms)`)
})

t.test('redis: a delivery in Redis this service did not write is skipped, never obeyed; ' +
  'nor does it stand in the way of those due', { skip: NO_REDIS }, async (t) => {
  const { outbox, prefix, redis, started, finished } = await withARun(t)
  const run = started.run
  const strangers = {
    'not-json': '{',
    'not-a-delivery': JSON.stringify({ id: 'not-a-delivery', run, hello: 'world' }),
    'of-another-id': JSON.stringify({ ...started, id: 'another' }),
    'an-unknown-state': JSON.stringify({ ...started, id: 'an-unknown-state', state: 'sent' }),
    'attempts-not-a-list': JSON.stringify({ ...started, id: 'attempts-not-a-list', attempts: {} })
  }
  const dead = 'a-replica-long-gone'
  for (const [id, text] of Object.entries(strangers)) {
    await redis.set(`${prefix}webhook:${id}`, text)
    // First in line, and a dead replica's.
    await redis.zadd(`${prefix}webhooks:due`, 0, id)
    await redis.hset(`${prefix}webhooks:armed`, id, dead)
    await redis.sadd(`${prefix}webhooks:run:${run}`, id)
  }
  const count = Object.keys(strangers).length
  t.same(await outbox.dueDeliveries(new Date(), count), [], 'none of them due')
  t.same(idsOf(await outbox.dueDeliveries(new Date(), count)), [started.id], 'and no longer in the way')
  t.same(await outbox.orphanedDeliveries(), [], 'nor orphans')
  t.equal(await redis.hlen(`${prefix}webhooks:armed`), 1, 'only the armed delivery it wrote is left to look at')
  t.same(idsOf(await outbox.deliveriesOf(run)), [started.id, finished.id], 'nor the run’s')
  for (const [id, text] of Object.entries(strangers)) {
    await outbox.fireDelivery(id, '{"obeyed":true}', new Date())
    await outbox.claimDelivery(id, REPLICA, 60_000)
    await outbox.recordAttempt(id, attempt(200), { state: 'delivered', nextAttemptAt: null })
    t.equal(await redis.get(`${prefix}webhook:${id}`), text, `${id}: left as it is`)
    t.equal(await redis.get(`${prefix}webhook:${id}:claim`), null, `${id}: its claim released all the same`)
  }
  // What a race may leave for a moment (an index read just before the delivery moved on): its own state counts.
  await redis.zadd(`${prefix}webhooks:due`, 0, finished.id)
  await redis.hset(`${prefix}webhooks:armed`, started.id, dead)
  t.same(idsOf(await outbox.dueDeliveries(new Date(), count)), [started.id], 'an armed one is not due')
  await outbox.recordAttempt(started.id, attempt(200), { state: 'delivered', nextAttemptAt: null })
  await redis.zadd(`${prefix}webhooks:due`, 0, started.id)
  t.same(await outbox.dueDeliveries(new Date(), count), [], 'nor a delivered one')
  t.same(await outbox.orphanedDeliveries(), [], 'nor is it an orphan')
  await redis.set(`${prefix}webhook:${finished.id}`, strangers['not-json'])
  await outbox.fireDelivery(finished.id, '{"obeyed":true}', new Date())
  t.equal(await redis.get(`${prefix}webhook:${finished.id}`), '{', 'one it wrote and something else replaced, too')
  await redis.del(`${prefix}webhook:${started.id}`)
  t.same(await outbox.deliveriesOf(run), [], 'one that expired is gone from its run')
  t.equal(await redis.sismember(`${prefix}webhooks:run:${run}`, started.id), 0)
})

t.test('redis: Redis away is RUNS_UNAVAILABLE for the outbox too', { skip: NO_REDIS }, async (t) => {
  const { url, stop } = await startRedis(t)
  const store = new RedisRunStore({
    ...RETENTION, url, keyPrefix: 'x:', ttlMs: 300, timeoutMs: 300, replica: REPLICA, log
  })
  t.teardown(() => store.close())
  await stop()
  await t.rejects(store.outbox.dueDeliveries(new Date(), 10), { code: 'RUNS_UNAVAILABLE' })
})

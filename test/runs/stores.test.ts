import t, { type Test } from 'tap'
import type BetterSqlite3 from 'better-sqlite3'
import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import pino from 'pino'
import { encodeEvent, parseEventId, RunEventLog, type StoredEvent } from '#src/runs/event-log.js'
import { MemoryRunStore } from '#src/runs/stores/memory-store.js'
import { RedisRunStore } from '#src/runs/stores/redis-store.js'
import type { RetentionOptions, RunRecord, RunStore, SessionRecord } from '#src/runs/stores/run-store.js'
import { SqliteRunStore } from '#src/runs/stores/sqlite-store.js'
import type { RunResult } from '#src/schemas/run.js'
import { build, processesLeft, scenario, tempDir, until, waitFor } from '../helpers/index.js'
import { runResult } from '../helpers/results.js'
import { NO_REDIS, redisEnv, slowAtFirst, startRedis } from '../helpers/redis.js'

// One contract, every store: what a run store keeps, for how long, and what it gives back.

const log = pino({ level: 'silent' })
const REPLICA = 'replica-under-test'

const record = (caller: string, overrides: Partial<RunRecord> = {}): RunRecord => ({
  id: randomUUID(),
  caller,
  tool: 'crush_run',
  status: 'running',
  createdAt: new Date().toISOString(),
  finishedAt: null,
  result: null,
  replica: REPLICA,
  ...overrides
})

const output = (offset: number, data: string): StoredEvent => {
  const end = offset + Buffer.byteLength(data)
  return { id: end, offset, end, frame: encodeEvent({ type: 'output', id: end, offset, data }) }
}

const finished = (run: RunRecord, status: RunRecord['status'] = 'succeeded'): RunRecord => ({
  ...run,
  status,
  finishedAt: new Date().toISOString(),
  result: resultOf(run.tool)
})

const resultOf = (tool: string): RunResult => runResult({ tool })

type Open = (t: Test, retention: RetentionOptions) => Promise<RunStore>

/** A session as a run leaves it: claude's, on the host, just now, unless said otherwise. */
const sessionOf = (caller: string, overrides: Partial<SessionRecord> = {}): SessionRecord => ({
  id: randomUUID(),
  tool: 'claude_run',
  caller,
  cwd: null,
  wslDistro: null,
  wslUser: null,
  updatedAt: new Date().toISOString(),
  ...overrides
})

const stores: Record<string, Open> = {
  memory: async (t, retention) => {
    const store = new MemoryRunStore(retention)
    t.teardown(() => store.close())
    return store
  },
  sqlite: async (t, retention) => {
    const store = new SqliteRunStore(tempDir(t), retention, REPLICA)
    t.teardown(() => store.close())
    return store
  }
}
if (NO_REDIS === false) {
  stores['redis'] = async (t, retention) => {
    const { url } = await startRedis(t)
    const { REDIS_URL, SLOTS_KEY_PREFIX } = redisEnv(url)
    const store = new RedisRunStore({
      ...retention, url: REDIS_URL, keyPrefix: SLOTS_KEY_PREFIX, ttlMs: 10_000, replica: REPLICA, log
    })
    await store.recover()
    t.teardown(() => store.close())
    return store
  }
}

for (const [kind, open] of Object.entries(stores)) {
  t.test(`${kind} store`, async (t) => {
    t.test('spend: each token’s runs’ costs over a window, the older forgotten as more are recorded', async (t) => {
      const store = await open(t, {
        retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100
      })
      const now = Date.now()
      const hoursAgo = (hours: number) => new Date(now - hours * 3_600_000)
      t.equal(await store.spend.spentSince('alice', hoursAgo(24)), 0, 'nothing yet')
      await store.spend.record('alice', 'run-1', 0.5, hoursAgo(30))
      await store.spend.record('alice', 'run-2', 0.25, hoursAgo(2))
      await store.spend.record('alice', 'run-3', 0.125, hoursAgo(0))
      await store.spend.record('bob', 'run-4', 4, hoursAgo(1))
      t.equal(await store.spend.spentSince('alice', hoursAgo(24)), 0.375, 'the last 24 hours only')
      t.equal(await store.spend.spentSince('alice', hoursAgo(40)), 0.375, 'a day older than the last: gone')
      t.equal(await store.spend.spentSince('alice', hoursAgo(1)), 0.125)
      t.equal(await store.spend.spentSince('bob', hoursAgo(24)), 4, 'each token its own')
      await store.spend.record('__proto__', 'run-5', 1, hoursAgo(0))
      t.equal(await store.spend.spentSince('__proto__', hoursAgo(24)), 1, 'any name is a name')
    })

    t.test('a session is its owner’s and its tool’s, forgotten past retention; ' +
      'one claim at a time, released by its holder', async (t) => {
      const store = await open(t, {
        retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100
      })
      const session = sessionOf('alice', { cwd: '/srv/p' })
      await store.saveSession(session)
      t.same(await store.session('claude_run', session.id), session)
      t.equal(await store.session('codex_run', session.id), undefined, 'another tool’s id space')
      t.equal(await store.session('claude_run', randomUUID()), undefined)
      const stale = { ...session, id: randomUUID(), updatedAt: new Date(Date.now() - 61_000).toISOString() }
      await store.saveSession(stale)
      t.equal(await store.session('claude_run', stale.id), undefined, 'past retention since its last run')

      t.ok(await store.claimSession('claude_run', session.id, 'run-a', 60_000))
      t.notOk(await store.claimSession('claude_run', session.id, 'run-b', 60_000), 'held')
      await store.releaseSession('claude_run', session.id, 'run-b')
      t.notOk(await store.claimSession('claude_run', session.id, 'run-b', 60_000), 'only its holder releases it')
      t.ok(await store.claimSession('codex_run', session.id, 'run-b', 60_000), 'another tool’s session is another')
      await store.releaseSession('claude_run', session.id, 'run-a')
      t.ok(await store.claimSession('claude_run', session.id, 'run-b', 50))
      t.ok(await until(
        () => store.claimSession('claude_run', session.id, 'run-c', 60_000), (claimed) => claimed, 5000,
        'the claim to lapse'
      ), 'a claim its holder never released lapses')
    })

    t.test('a session is created by one owner and never re-owned: ' +
      'another owner saving its id changes nothing', async (t) => {
      const store = await open(t, {
        retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100
      })
      const bobs = sessionOf('bob', { cwd: '/home/bob/p' })
      t.equal(await store.saveSession(bobs), true)
      const forged = {
        ...bobs, caller: 'alice', cwd: '/home/alice', updatedAt: new Date(Date.now() + 1000).toISOString()
      }
      t.equal(await store.saveSession(forged), false, 'alice’s run reporting bob’s id is refused')
      t.same(await store.session('claude_run', bobs.id), bobs, 'bob’s, where it ran, as it was')
      const later = { ...bobs, cwd: '/home/bob/q', updatedAt: new Date(Date.now() + 2000).toISOString() }
      t.equal(await store.saveSession(later), true, 'its owner’s next run updates it')
      t.same(await store.session('claude_run', bobs.id), later)
    })

    t.test('an owner keeps at most sessionsMaxPerOwner sessions: the least recently used go, ' +
      'another owner’s stay', async (t) => {
      const store = await open(t, {
        retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 3
      })
      const at = (seconds: number): string => new Date(Date.now() - 30_000 + seconds * 1000).toISOString()
      const session = (owner: string, seconds: number) =>
        sessionOf(owner, { tool: 'codex_run', updatedAt: at(seconds) })
      const bobs = session('bob', 0)
      await store.saveSession(bobs)
      const alices = [1, 2, 3].map((seconds) => session('alice', seconds))
      for (const each of alices) await store.saveSession(each)
      // The oldest is used again: the next one to go is the second.
      await store.saveSession({ ...alices[0]!, updatedAt: at(4) })
      await store.saveSession(session('alice', 5))
      t.equal(await store.session('codex_run', alices[1]!.id), undefined, 'the least recently used went')
      t.ok(await store.session('codex_run', alices[0]!.id), 'one used again stays')
      t.ok(await store.session('codex_run', alices[2]!.id))
      t.same(await store.session('codex_run', bobs.id), bobs, 'bob’s is not alice’s to push out')
    })

    t.test('a run’s task excerpt, deadline, model, limits, A2A context and kind are kept and listed; ' +
      'a run stored without them reads back without', async (t) => {
      const store = await open(t, {
        retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100
      })
      const briefed = record('alice', {
        task: 'Add tests',
        deadline: new Date(Date.now() + 60_000).toISOString(),
        model: 'sonnet',
        limits: { max_turns: 5, max_cost_usd: 0.25 },
        context: 'c0ffee',
        kind: 'stream'
      })
      const bare = record('alice', { createdAt: new Date(Date.now() - 1000).toISOString() })
      for (const run of [briefed, bare]) await store.create(run)
      t.same(await store.get(briefed.id), briefed)
      t.same(await store.get(bare.id), bare)
      t.same(await store.list('alice'), [briefed, bare].map(({ result: _result, ...listing }) => listing))
      await store.finish(finished(briefed))
      t.match(
        await store.get(briefed.id), {
          task: 'Add tests',
          deadline: briefed.deadline,
          model: 'sonnet',
          limits: briefed.limits,
          context: 'c0ffee',
          kind: 'stream',
          status: 'succeeded'
        },
        'kept at its end'
      )
    })

    t.test('a step’s id falls between two bytes: kept exactly, in order, and resumed after', async (t) => {
      const store = await open(t, {
        retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100
      })
      const run = record('alice')
      await store.create(run)
      const log = new RunEventLog(1 << 20)
      log.appendOutput({ type: 'output', id: 1, offset: 0, data: 'a' })
      for (const text of ['one', 'two']) log.appendStep({ kind: 'message', text, truncated: false })
      log.appendOutput({ type: 'output', id: 3, offset: 1, data: 'bb' })
      await store.saveEvents(run.id, log.after(0), undefined)
      const kept = await store.events(run.id, 0, 100)
      t.same(kept, log.after(0), 'ids, ranges and frames as the log gave them')
      t.same(
        (await store.events(run.id, parseEventId('1.1')!, 100)).map((event) => event.id), [1 + 2 / 4096, 3],
        'after a step: the next step, then the output'
      )
    })

    t.test('keeps a run, its events (less the dropped middle) and its end; lists by owner, newest first', async (t) => {
      const store = await open(t, {
        retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100
      })
      t.equal(store.kind, kind)
      const first = record('alice', { createdAt: new Date(Date.now() - 1000).toISOString() })
      const second = record('alice')
      const other = record('bob')
      for (const run of [first, second, other]) await store.create(run)
      t.same(await store.get(first.id), first)
      t.same((await store.list('alice')).map((run) => run.id), [second.id, first.id])
      t.same((await store.list('bob')).map((run) => run.id), [other.id])
      t.same(await store.list('nobody'), [])
      t.equal(await store.get('no-such-run'), undefined)

      const events = [output(0, 'a'), output(1, 'bb'), output(3, 'ccc'), output(6, 'dddd')]
      await store.saveEvents(first.id, events.slice(0, 2), undefined)
      await store.saveEvents(first.id, events.slice(2), { after: 1, before: 6 })
      const kept = await store.events(first.id, 0, 100)
      t.same(
        kept.map((event) => [event.id, event.offset, event.end]), [[1, 0, 1], [6, 3, 6], [10, 6, 10]],
        'the dropped range is gone'
      )
      t.same(kept[1]!.frame, events[2]!.frame, 'frames come back byte for byte')
      t.same((await store.events(first.id, 1, 1)).map((event) => event.id), [6], 'after an id, up to a count')
      t.same(await store.events(second.id, 0, 100), [])

      const ended = finished(first)
      await store.finish(ended)
      t.same(await store.get(first.id), ended)
      t.notOk(
        (await store.list('alice')).some((listing) => 'result' in listing),
        'a listing never carries (nor reads) results'
      )
      store.onCancelRequest(() => {})
      await store.requestCancel(second)
    })

    t.test('retention: the oldest finished runs past the count go, with their events', async (t) => {
      const store = await open(t, {
        retentionMs: 60_000, maxFinished: 2, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100
      })
      const runs = [3, 2, 1].map((secondsAgo) => record('alice', {
        createdAt: new Date(Date.now() - secondsAgo * 1000).toISOString()
      }))
      for (const run of runs) {
        await store.create(run)
        await store.saveEvents(run.id, [output(0, 'x')], undefined)
        // Each finishes at a millisecond of its own (finishedAt orders them), a few apart so no clock rounding
        // ties two.
        await sleep(5)
        await store.finish(finished(run))
      }
      t.equal(await store.get(runs[0]!.id), undefined, 'the oldest went')
      t.same(await store.events(runs[0]!.id, 0, 10), [], 'and its events')
      t.same((await store.list('alice')).map((run) => run.id), [runs[2]!.id, runs[1]!.id])
    })

    t.test('retention: a finished run past its age is gone; a running one stays', async (t) => {
      const store = await open(t, {
        retentionMs: 50, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100
      })
      const done = record('alice')
      const running = record('alice')
      await store.create(done)
      await store.create(running)
      await store.finish(finished(done))
      t.equal(
        await until(() => store.get(done.id), (found) => found === undefined, 2000, 'the finished run to expire'),
        undefined
      )
      t.same((await store.list('alice')).map((run) => run.id), [running.id])
    })
  })
}

t.test('sqlite: runs a previous life left running are lost at the next start, with their events', async (t) => {
  const dir = tempDir(t)
  const retention = { retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100 }
  const before = new SqliteRunStore(dir, retention, REPLICA)
  const run = record('alice')
  await before.create(run)
  await before.saveEvents(run.id, [output(0, 'partial')], undefined)
  await before.close()
  const after = new SqliteRunStore(dir, retention, REPLICA)
  t.teardown(() => after.close())
  t.same(await after.recover(), [run.id])
  t.match(await after.get(run.id), { status: 'lost', finishedAt: String, result: null })
  t.equal((await after.events(run.id, 0, 10)).length, 1)
  t.same(await after.recover(), [], 'only once')
  t.same(await new MemoryRunStore(retention).recover(), [], 'memory: nothing survives to recover')
})

t.test('sqlite: a file an older version made gains the task and deadline columns; ' +
  'its runs read back without them', async (t) => {
  const dir = tempDir(t)
  const retention = { retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100 }
  const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3
  const old = new Database(join(dir, 'runs.sqlite'))
  old.exec(
    'CREATE TABLE runs (id TEXT PRIMARY KEY, owner TEXT NOT NULL, tool TEXT NOT NULL, status TEXT NOT NULL, ' +
    'created_at TEXT NOT NULL, finished_at TEXT, result TEXT, replica TEXT NOT NULL)'
  )
  const before = finished(record('alice'))
  old.prepare('INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run(
    before.id, before.caller, before.tool, before.status, before.createdAt, before.finishedAt,
    JSON.stringify(before.result), before.replica
  )
  old.close()
  const store = new SqliteRunStore(dir, retention, REPLICA)
  t.teardown(() => store.close())
  t.same(await store.get(before.id), before)
  const briefed = record('alice', { task: 'Add tests', deadline: new Date().toISOString() })
  await store.create(briefed)
  t.same(await store.get(briefed.id), briefed, 'a new run keeps them')
})

t.test('sqlite: pruning stale sessions, on every session saved, reads them by age through an index, ' +
  'not the whole table', async (t) => {
  const dir = tempDir(t)
  const store = new SqliteRunStore(dir, {
    retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100
  }, REPLICA)
  await store.close()
  const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3
  const db = new Database(join(dir, 'runs.sqlite'), { readonly: true })
  t.teardown(() => db.close())
  const plan = db.prepare('EXPLAIN QUERY PLAN DELETE FROM sessions WHERE updated_at < ?')
    .all(new Date().toISOString()) as Array<{ detail: string }>
  t.match(plan.map((step) => step.detail).join('\n'), /USING (COVERING )?INDEX sessions_by_age/)
})

/**
 * Asks for `run` to be cancelled until its replica has heard it (its subscription is made as its connection
 * comes up).
 */
const askUntilHeard = (reader: RedisRunStore, run: RunRecord, heard: () => string | undefined, timeoutMs: number) =>
  until(
    async () => {
      await reader.requestCancel(run)
      return heard()
    },
    (id) => id !== undefined,
    timeoutMs,
    'the cancel to be heard'
  )

t.test('redis: a run whose replica stopped saying it is alive is lost; ' +
  'a cancel request reaches its replica', { skip: NO_REDIS }, async (t) => {
  const { url } = await startRedis(t)
  const { REDIS_URL, SLOTS_KEY_PREFIX } = redisEnv(url)
  const options = {
    retentionMs: 60_000,
    maxFinished: 10,
    sessionsRetentionMs: 60_000,
    sessionsMaxPerOwner: 100,
    url: REDIS_URL,
    keyPrefix: SLOTS_KEY_PREFIX,
    ttlMs: 10_000,
    log
  }
  const owner = new RedisRunStore({ ...options, replica: 'a' })
  const reader = new RedisRunStore({ ...options, replica: 'b' })
  t.teardown(() => reader.close())
  await owner.recover()
  await reader.recover()
  const cancelled = new Promise<string>((resolve) => owner.onCancelRequest(resolve))
  const run = record('alice', { replica: 'a' })
  await owner.create(run)
  let heard: string | undefined
  void cancelled.then((id) => (heard = id))
  const answered = await askUntilHeard(reader, run, () => heard, 2000)
  t.equal(answered, run.id, 'the replica running it heard the cancel')
  t.match(await reader.get(run.id), { status: 'running' }, 'alive: still running')
  await owner.close()
  t.match(await reader.get(run.id), { status: 'lost', finishedAt: String }, 'its replica left: lost at once')
  t.match(await reader.list('alice'), [{ id: run.id, status: 'lost' }])
})

t.test('redis: a replica that met a slow Redis as it started ' +
  'still hears cancel requests', { skip: NO_REDIS }, async (t) => {
  const { url } = await startRedis(t)
  const { SLOTS_KEY_PREFIX } = redisEnv(url)
  const options = {
    retentionMs: 60_000,
    maxFinished: 10,
    sessionsRetentionMs: 60_000,
    sessionsMaxPerOwner: 100,
    keyPrefix: SLOTS_KEY_PREFIX,
    ttlMs: 300,
    log
  }
  // Its first answers come later than the service waits for a command (1 s): the subscription must survive that.
  const owner = new RedisRunStore({ ...options, url: await slowAtFirst(t, url, 2000, 1500), replica: 'a' })
  t.teardown(() => owner.close())
  const reader = new RedisRunStore({ ...options, url, replica: 'b' })
  t.teardown(() => reader.close())
  let heard: string | undefined
  owner.onCancelRequest((id) => (heard = id))
  const run = record('alice', { replica: 'a' })
  t.equal(await askUntilHeard(reader, run, () => heard, 10_000), run.id, 'heard once Redis answers in time')
})

t.test('redis: a subscription Redis refuses is asked for again until it is made', { skip: NO_REDIS }, async (t) => {
  const { url } = await startRedis(t)
  const { SLOTS_KEY_PREFIX } = redisEnv(url)
  const admin = new Redis(url)
  t.teardown(() => admin.disconnect())
  // No channel allowed: SUBSCRIBE fails (NOPERM), as any error that ends a queued subscription would.
  await admin.call('ACL', 'SETUSER', 'default', 'resetchannels')
  const warnings: string[] = []
  const watched = pino({ level: 'warn' }, { write: (line: string) => warnings.push(String(JSON.parse(line).msg)) })
  const options = {
    retentionMs: 60_000,
    maxFinished: 10,
    sessionsRetentionMs: 60_000,
    sessionsMaxPerOwner: 100,
    keyPrefix: SLOTS_KEY_PREFIX,
    ttlMs: 300,
    url
  }
  const owner = new RedisRunStore({ ...options, log: watched, replica: 'a' })
  t.teardown(() => owner.close())
  let heard: string | undefined
  owner.onCancelRequest((id) => (heard = id))
  await waitFor(() => warnings.includes('could not subscribe to cancellations; trying again'), 5000, 'the refusal')
  await admin.call('ACL', 'SETUSER', 'default', 'allchannels')
  const reader = new RedisRunStore({ ...options, log, replica: 'b' })
  t.teardown(() => reader.close())
  const run = record('alice', { replica: 'a' })
  t.equal(await askUntilHeard(reader, run, () => heard, 10_000), run.id, 'heard once Redis allowed it')
})

t.test('redis: Redis away is a 503 RUNS_UNAVAILABLE, not a hang', { skip: NO_REDIS }, async (t) => {
  const { url, stop } = await startRedis(t)
  await stop()
  const store = new RedisRunStore({
    retentionMs: 1000,
    maxFinished: 1,
    sessionsRetentionMs: 60_000,
    sessionsMaxPerOwner: 100,
    url,
    keyPrefix: 'x:',
    ttlMs: 300,
    replica: 'a',
    log
  })
  t.teardown(() => store.close())
  t.same(await store.recover(), [], 'starting is not refused')
  await t.rejects(store.get('any'), { code: 'RUNS_UNAVAILABLE', message: /Redis/ })
})

t.test('redis: every key expires, a running run\'s too; ' +
  'what this service did not write is skipped, never a 503', { skip: NO_REDIS }, async (t) => {
  const { url } = await startRedis(t)
  const { REDIS_URL, SLOTS_KEY_PREFIX } = redisEnv(url)
  const store = new RedisRunStore({
    retentionMs: 60_000,
    maxFinished: 10,
    sessionsRetentionMs: 60_000,
    sessionsMaxPerOwner: 100,
    url: REDIS_URL,
    keyPrefix: SLOTS_KEY_PREFIX,
    ttlMs: 10_000,
    replica: REPLICA,
    log
  })
  t.teardown(() => store.close())
  await store.recover()
  const redis = new Redis(REDIS_URL)
  t.teardown(() => redis.disconnect())
  const running = record('alice')
  await store.create(running)
  await store.saveEvents(running.id, [output(0, 'hello')], undefined)
  const ttls = async (...keys: string[]) => Promise.all(keys.map((key) => redis.pttl(`${SLOTS_KEY_PREFIX}${key}`)))
  for (const ttl of await ttls(`run:${running.id}`, `run:${running.id}:events`, 'runs:owner:alice')) {
    t.ok(ttl > 1800_000, `a running run's key outlives the longest run, then expires: ${String(ttl)} ms`)
  }
  const done = record('alice')
  await store.create(done)
  await store.finish(finished(done))
  for (const ttl of await ttls(`run:${done.id}`, `run:${done.id}:result`, 'runs:finished')) {
    t.ok(ttl > 0 && ttl <= 60_000, 'a finished run\'s, its retention')
  }

  // Written by something else: garbage, a shape of its own, another owner's record slipped into alice's index.
  const garbage = randomUUID()
  const alien = randomUUID()
  const bob = record('bob')
  await redis.set(`${SLOTS_KEY_PREFIX}run:${garbage}`, '{"id":')
  await redis.set(`${SLOTS_KEY_PREFIX}run:${alien}`, JSON.stringify({ id: alien, owner: 'alice', status: 'pwned' }))
  await store.create(bob)
  await redis.zadd(
    `${SLOTS_KEY_PREFIX}runs:owner:alice`,
    Date.now() + 10_000, garbage, Date.now() + 10_000, alien, Date.now() + 10_000, bob.id
  )
  t.same(
    (await store.list('alice')).map((run) => run.id).sort(), [running.id, done.id].sort(),
    'alice sees her runs, and only hers'
  )
  t.equal(await store.get(garbage), undefined, 'a record that does not parse is not found')
  t.equal(await store.get(alien), undefined, 'nor one of a shape of its own')
  await redis.set(`${SLOTS_KEY_PREFIX}run:${done.id}:result`, JSON.stringify({ ok: 'yes' }))
  t.match(
    await store.get(done.id), { status: 'succeeded', result: null }, 'a result that is not one: the run without it'
  )
})

/** A Redis store and a plain client to the same Redis, to write what an older version of the service wrote. */
async function storeWithRawRedis(t: Test) {
  const { url } = await startRedis(t)
  const { REDIS_URL, SLOTS_KEY_PREFIX } = redisEnv(url)
  const options = { retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100 }
  const store = new RedisRunStore({
    ...options, url: REDIS_URL, keyPrefix: SLOTS_KEY_PREFIX, ttlMs: 10_000, replica: REPLICA, log
  })
  t.teardown(() => store.close())
  const redis = new Redis(REDIS_URL)
  t.teardown(() => redis.disconnect())
  return { store, redis, SLOTS_KEY_PREFIX }
}

t.test('redis: a run 0.1.0 stored (its caller named `owner`) ' +
  'reads back and lists as its caller’s', { skip: NO_REDIS }, async (t) => {
  const { store, redis, SLOTS_KEY_PREFIX } = await storeWithRawRedis(t)
  const { caller, result: _result, ...rest } = finished(record('alice'))
  await redis.set(`${SLOTS_KEY_PREFIX}run:${rest.id}`, JSON.stringify({ ...rest, owner: caller }))
  await redis.zadd(`${SLOTS_KEY_PREFIX}runs:owner:alice`, Date.parse(rest.createdAt), rest.id)
  t.match(await store.get(rest.id), { id: rest.id, caller: 'alice', status: 'succeeded' })
  t.same((await store.list('alice')).map((run) => run.caller), ['alice'])
})

t.test('redis: a session 0.1.0 stored (its caller named `owner`) ' +
  'stays its caller’s alone', { skip: NO_REDIS }, async (t) => {
  const { store, redis, SLOTS_KEY_PREFIX } = await storeWithRawRedis(t)
  const { caller: _caller, ...session } = sessionOf('alice', { cwd: '/srv/p' })
  await redis.set(`${SLOTS_KEY_PREFIX}session:claude_run:${session.id}`, JSON.stringify({ ...session, owner: 'alice' }))
  t.match(await store.session('claude_run', session.id), { caller: 'alice', cwd: '/srv/p' }, 'read as its caller’s')
  const later = new Date(Date.now() + 1000).toISOString()
  t.equal(
    await store.saveSession({ ...session, caller: 'bob', updatedAt: later }), false, 'another caller cannot take it'
  )
  t.equal(await store.saveSession({ ...session, caller: 'alice', updatedAt: later }), true, 'its caller continues it')
  t.match(await store.session('claude_run', session.id), { caller: 'alice', updatedAt: later })
})

t.test('a result stored before processes_may_remain, session_id, usage and steps_summary existed ' +
  'reads back with their defaults, in every store that outlives a version', async (t) => {
  const {
    processes_may_remain: _added, session_id: _session, usage: _usage, steps_summary: _summary, ...before
  } = resultOf('crush_run')
  // The memory store holds only what this very process ran.
  for (const [kind, open] of Object.entries(stores).filter(([kind]) => kind !== 'memory')) {
    const store = await open(t, {
      retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100
    })
    const run = record('alice')
    await store.create(run)
    await store.finish({ ...finished(run), result: before as RunResult })
    t.match(await store.get(run.id), {
      result: { ok: true, processes_may_remain: false, session_id: null, usage: null, steps_summary: null }
    }, kind)
  }
})

t.test('redis: a run that cannot be stored is refused with the store\'s 503, ' +
  'and its agent is stopped', { skip: NO_REDIS }, async (t) => {
  const { url } = await startRedis(t)
  const env = redisEnv(url, { RUNS_STORE: 'redis' })
  const app = await build(t, env)
  // The slots still work; only the run's record cannot be written (its owner's index is not a sorted set).
  const redis = new Redis(url)
  t.teardown(() => redis.disconnect())
  await redis.set(`${env.SLOTS_KEY_PREFIX}runs:owner:anonymous`, 'not a sorted set')
  const marker = `unstored-${randomUUID()}`
  const answer = await app.inject({
    method: 'POST', url: '/runs', payload: { tool: 'crush_run', task: scenario.sleep(60_000, marker) }
  })
  // Its record is written once its agent runs: this answer means an agent had started.
  t.match(answer.json(), { statusCode: 503, code: 'RUNS_UNAVAILABLE' })
  await until(
    () => processesLeft(marker), (left) => left.length === 0, 10_000, 'the agent nobody could find again stopped'
  )
  await until(() => app.slots.inUse('crush_run'), (inUse) => inUse === 0, 10_000, 'its slot back')
})

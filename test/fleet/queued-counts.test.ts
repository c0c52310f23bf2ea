import t from 'tap'
import { Redis } from 'ioredis'
import { FleetQueuedCounts } from '#src/fleet/queued-counts.js'
import pino from 'pino'
import { until } from '../helpers/index.js'
import { NO_REDIS, startRedis } from '../helpers/redis.js'

// How many runs wait across the fleet (issue 40, GET /tools' `queued`): each replica's own count in Redis, summed
// over those renewed within the TTL. On a real redis-server.

const TTL_MS = 600
const PREFIX = 'counts'
const KEY = `${PREFIX}:queued`

t.test('each replica’s waiting runs, summed per tool; a replica gone stops counting after the TTL', { skip: NO_REDIS },
  async (t) => {
    const { url } = await startRedis(t)
    const redis = new Redis(url)
    t.teardown(() => { redis.disconnect() })
    const replica = (): FleetQueuedCounts => {
      const counts = new FleetQueuedCounts({
        url, prefix: PREFIX, ttlMs: TTL_MS, timeoutMs: 1000, log: pino({ level: 'silent' })
      })
      t.teardown(() => counts.close())
      return counts
    }
    const [one, two] = [replica(), replica()]
    one.set('crush_run', 3)
    t.equal(await one.total('crush_run'), 3, 'a count set before Redis was reached is written once it is')
    t.equal(await two.total('crush_run'), 3, 'the other replica, connected, reads it')
    two.set('crush_run', 2)
    two.set('codex_run', 1)
    t.equal(await one.total('crush_run'), 5, 'either replica counts both')
    t.equal(await two.total('crush_run'), 5)
    t.equal(await one.total('codex_run'), 1)
    t.equal(await one.total('claude_run'), 0)

    one.set('crush_run', 1)
    t.equal(await two.total('crush_run'), 3, 'a change is told at once')
    two.set('crush_run', 0)
    two.set('codex_run', 0)
    t.equal(await redis.hlen(KEY), 1, 'a replica with nothing waiting has no entry')

    // Renewed while runs wait: still counted well past the TTL.
    const since = Date.now()
    await until(() => Date.now() - since, (waited) => waited > 3 * TTL_MS, 10_000, 'three TTLs to pass')
    t.equal(await two.total('crush_run'), 1, 'a count renewed while runs wait outlives the TTL')

    // What a killed replica left, and what is not an entry at all: neither counted, both struck off.
    await redis.hset(KEY, 'killed', JSON.stringify({ at: Date.now() - TTL_MS - 1, queued: { crush_run: 7 } }))
    await redis.hset(KEY, 'forged', JSON.stringify({ at: Date.now(), queued: { crush_run: -50 } }))
    await redis.hset(KEY, 'garbled', '{not json')
    t.equal(await one.total('crush_run'), 1, 'neither a stale nor a malformed entry counts')
    t.equal(await redis.hlen(KEY), 1, 'and they are struck off')

    await one.close()
    t.equal(await redis.hlen(KEY), 0, 'a replica that stops leaves at once')
  })

t.test('Redis away: the count is SLOTS_UNAVAILABLE, as the slots’ own is', { skip: NO_REDIS }, async (t) => {
  const { url, stop } = await startRedis(t)
  const counts = new FleetQueuedCounts({
    url, prefix: PREFIX, ttlMs: TTL_MS, timeoutMs: 300, log: pino({ level: 'silent' })
  })
  t.teardown(() => counts.close())
  t.equal(await counts.total('crush_run'), 0)
  await stop()
  await t.rejects(counts.total('crush_run'), { code: 'SLOTS_UNAVAILABLE' })
})

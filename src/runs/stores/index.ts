import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../../config.js'
import { MemoryRunStore } from './memory-store.js'
import type { RunStore } from './run-store.js'
import { SqliteRunStore } from './sqlite-store.js'

/** The store RUNS_STORE names; each is loaded only when chosen (a native module, a Redis client). */
export async function createRunStore(config: Config, replica: string, log: FastifyBaseLogger): Promise<RunStore> {
  const retention = {
    retentionMs: config.runsRetentionMs,
    maxFinished: config.runsMaxFinished,
    sessionsRetentionMs: config.sessionsRetentionMs,
    sessionsMaxPerOwner: config.sessionsMaxPerOwner
  }
  if (config.runsStore === 'memory') return new MemoryRunStore(retention)
  if (config.runsStore === 'sqlite') return new SqliteRunStore(config.dataDir, retention)
  if (config.slots.backend !== 'redis') throw new Error('RUNS_STORE=redis needs SLOTS_BACKEND=redis')
  const { RedisRunStore } = await import('./redis-store.js')
  const { url, keyPrefix, ttlMs, timeoutMs } = config.slots
  return new RedisRunStore({ ...retention, url, keyPrefix, ttlMs, timeoutMs, replica, log })
}

import type { FastifyBaseLogger } from 'fastify'
import { once } from 'node:events'
import { Redis } from 'ioredis'

/**
 * Redis must answer promptly or not at all: a request never hangs on it. REDIS_TIMEOUT_MS's default; a Redis far
 * away, or a machine this busy, may need more.
 */
const DEFAULT_REDIS_TIMEOUT_MS = 1000

/** A client that fails fast while disconnected instead of queueing commands until Redis comes back. */
export function createRedis(url: string, log: FastifyBaseLogger, timeoutMs = DEFAULT_REDIS_TIMEOUT_MS): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000)
  })
  // ioredis reports connection trouble as events; health checks and the 503s carry it to callers.
  redis.on('error', (error) => log.debug({ err: error }, 'redis connection error'))
  return redis
}

/**
 * A client for subscriptions: nobody waits on what it asks, so it waits for Redis (and subscribes again after a
 * reconnection) rather than fail.
 */
export function createSubscriber(url: string, log: FastifyBaseLogger, timeoutMs = DEFAULT_REDIS_TIMEOUT_MS): Redis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: null,
    connectTimeout: timeoutMs,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000)
  })
  redis.on('error', (error) => log.debug({ err: error }, 'redis subscriber connection error'))
  return redis
}

/** The wait for a client's connection, shared by every caller that arrives while it is being made. */
const connecting = new WeakMap<Redis, Promise<void>>()

/**
 * Commands fail at once while disconnected (no offline queue); a connection still being made (just after start, or
 * reconnecting) gets a short wait instead of a spurious 503. Callers share one wait: one pair of listeners on the
 * client however many requests arrive at once.
 */
export async function whenConnected(redis: Redis): Promise<void> {
  if (redis.status === 'ready') return
  let wait = connecting.get(redis)
  if (wait === undefined) {
    // once() also rejects on 'error', the usual way a connection attempt fails.
    const timeoutMs = redis.options.connectTimeout ?? DEFAULT_REDIS_TIMEOUT_MS
    wait = once(redis, 'ready', { signal: AbortSignal.timeout(timeoutMs) })
      .then(() => undefined)
      .finally(() => connecting.delete(redis))
    connecting.set(redis, wait)
  }
  try {
    await wait
  } catch (error) {
    throw new Error(`Redis is not connected (${redis.status}): ${(error as Error).message}`)
  }
}

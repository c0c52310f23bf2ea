import { randomUUID } from 'node:crypto'
import { Type } from '@sinclair/typebox'
import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import { serviceError } from '../errors.js'
import { createRedis, whenConnected } from '../redis-client.js'
import { freshEntries } from './renewed-hash.js'

// Runs waiting for a slot wait on the replica that admitted them (src/slots/queue.ts): the fleet's count is the sum of
// every replica's. Each says its own in Redis as it changes and while it is not zero, so a replica killed with runs
// waiting stops counting after the TTL, as its slots do.

const QueuedEntry = Type.Object({
  /** When it was written, in ms since the epoch. */
  at: Type.Integer(),
  /** Each tool with runs waiting here, and how many. */
  queued: Type.Record(Type.String(), Type.Integer({ minimum: 1 }))
})

export interface QueuedCountsOptions {
  url: string
  /** The fleet's keys' prefix: the counts are the hash `<prefix>:queued`. */
  prefix: string
  /** Not renewed this long, a replica's count no longer counts. */
  ttlMs: number
  /** Redis' own bound on connecting and on each command. */
  timeoutMs: number
  log: FastifyBaseLogger
}

export class FleetQueuedCounts {
  readonly #redis: Redis
  readonly #key: string
  readonly #ttlMs: number
  /** This replica's field: any id of its own does, nobody else reads it. */
  readonly #field = randomUUID()
  readonly #own = new Map<string, number>()
  #renewal: NodeJS.Timeout | undefined

  constructor({ url, prefix, ttlMs, timeoutMs, log }: QueuedCountsOptions) {
    this.#redis = createRedis(url, log, timeoutMs)
    // What changed while it was not connected (at start, or Redis away) is written as soon as it is.
    this.#redis.on('ready', () => { if (this.#own.size > 0) this.#publish() })
    this.#key = `${prefix}:queued`
    this.#ttlMs = ttlMs
  }

  /** How many runs of `tool` wait here now: the fleet is told at once, renewed while any wait. */
  set(tool: string, queued: number): void {
    if (queued > 0) this.#own.set(tool, queued)
    else this.#own.delete(tool)
    this.#publish()
    if (this.#own.size === 0) {
      clearInterval(this.#renewal)
      this.#renewal = undefined
    } else {
      this.#renewal ??= setInterval(() => { this.#publish() }, Math.max(1, Math.floor(this.#ttlMs / 3))).unref()
    }
  }

  /** The runs of `tool` waiting on every replica renewed within the TTL, this one included. */
  async total(tool: string): Promise<number> {
    try {
      await whenConnected(this.#redis)
      const entries = await freshEntries(this.#redis, this.#key, this.#ttlMs, QueuedEntry, (entry) => entry.at)
      return entries.reduce((sum, entry) => sum + (entry.queued[tool] ?? 0), 0)
    } catch (error) {
      // The slots' own Redis, unreachable: what the slots' count says then too.
      throw serviceError('SLOTS_UNAVAILABLE', (error as Error).message)
    }
  }

  async close(): Promise<void> {
    clearInterval(this.#renewal)
    if (this.#own.size > 0) await this.#redis.hdel(this.#key, this.#field).catch(() => undefined)
    this.#redis.disconnect()
  }

  // One connection sends its commands in order: the last one written holds the latest counts. One that cannot be sent
  // (Redis away) is not waited on: the next change or renewal writes the whole entry again, and a stale one expires.
  #publish(): void {
    const write = this.#own.size === 0
      ? this.#redis.hdel(this.#key, this.#field)
      : this.#redis.hset(
        this.#key, this.#field, JSON.stringify({ at: Date.now(), queued: Object.fromEntries(this.#own) })
      )
    write.catch(() => undefined)
  }
}

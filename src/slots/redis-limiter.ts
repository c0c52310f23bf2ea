import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import { Semaphore, type LockOptions } from 'redis-semaphore'
import { serviceError } from '../errors.js'
import { createRedis, createSubscriber, whenConnected } from '../redis-client.js'
import type { SlotsHealth } from '../schemas/health.js'
import { leaseOnce, limitFor, type SlotLease, type SlotLimiter } from './limiter.js'

export interface RedisSlotOptions {
  url: string
  /** A slot whose holder stops refreshing it (a crashed replica) comes back after this long. */
  ttlMs: number
  keyPrefix: string
  /** How long a Redis command may take (REDIS_TIMEOUT_MS); the client's default when absent. */
  timeoutMs?: number
  log: FastifyBaseLogger
}

/**
 * redis-semaphore refreshes a held slot from a timer and lets a failed refresh (Redis unreachable) escape as an
 * unhandled rejection, which would bring the whole service down. A failed refresh here is logged and counts as still
 * held: the TTL decides, and a refresh that finds the slot expired once Redis is back reports it lost as usual.
 */
class RefreshTolerantSemaphore extends Semaphore {
  readonly #onRefreshError: (error: unknown) => void

  constructor(
    client: Redis,
    key: string,
    limit: number,
    options: LockOptions,
    onRefreshError: (error: unknown) => void
  ) {
    super(client, key, limit, options)
    this.#onRefreshError = onRefreshError
  }

  protected override async _refresh(): Promise<boolean> {
    try {
      return await super._refresh()
    } catch (error) {
      this.#onRefreshError(error)
      return true
    }
  }
}

/**
 * Per-tool limits shared by every replica, on redis-semaphore: each slot is a member of a sorted set scored by the
 * time its holder last refreshed it; holders refresh every third of the TTL while the run lives (so a 30-minute run
 * keeps its slot), and members older than the TTL — a crashed holder's — are dropped on the next acquire.
 */
export class RedisSlotLimiter implements SlotLimiter {
  readonly #redis: Redis
  readonly #limits: ReadonlyMap<string, number>
  readonly #options: RedisSlotOptions
  readonly #held = new Map<string, number>()
  /** Hears the slots given back anywhere in the fleet: made by the first listener. */
  #subscriber: Redis | undefined

  constructor(limits: Record<string, number>, options: RedisSlotOptions) {
    this.#limits = new Map(Object.entries(limits))
    this.#options = options
    this.#redis = createRedis(options.url, options.log, options.timeoutMs)
  }

  limit(tool: string): number {
    return limitFor(this.#limits, tool)
  }

  onFreedElsewhere(listener: (tool: string) => void): void {
    const { url, log, timeoutMs } = this.#options
    this.#subscriber ??= createSubscriber(url, log, timeoutMs)
    const channel = this.#freedChannel()
    this.#subscriber.on('message', (from: string, tool: string) => { if (from === channel) listener(tool) })
    this.#subscriber.subscribe(channel).catch((error: unknown) => {
      log.warn({ err: error }, 'could not hear of slots given back elsewhere: runs waiting ask again every 200 ms')
    })
  }

  inUse(tool: string): number {
    return this.#held.get(tool) ?? 0
  }

  async usage(tool: string): Promise<number> {
    try {
      await this.#connected()
      return await this.#redis.zcount(this.#setKey(tool), Date.now() - this.#options.ttlMs, '+inf')
    } catch (error) {
      throw serviceError('SLOTS_UNAVAILABLE', (error as Error).message)
    }
  }

  async health(): Promise<SlotsHealth> {
    try {
      await this.#connected()
      await this.#redis.ping()
      return { backend: 'redis', ok: true }
    } catch (error) {
      return { backend: 'redis', ok: false, error: (error as Error).message }
    }
  }

  async acquire(tool: string): Promise<SlotLease | null> {
    return this.#take(tool, this.#semaphore(tool))
  }

  async adopt(tool: string, holder: string): Promise<SlotLease | null> {
    // Renewed rather than taken: present and fresh, it is this one's from now on; gone, its TTL passed.
    return this.#take(tool, this.#semaphore(tool, { identifier: holder, acquiredExternally: true }))
  }

  #semaphore(tool: string, adopted?: Pick<LockOptions, 'identifier' | 'acquiredExternally'>): Semaphore {
    const { ttlMs, log } = this.#options
    return new RefreshTolerantSemaphore(
      this.#redis,
      this.#semaphoreKey(tool),
      this.limit(tool),
      {
        lockTimeout: ttlMs,
        refreshInterval: Math.max(1, Math.floor(ttlMs / 3)),
        acquireAttemptsLimit: 1,
        onLockLost: (error) => log.warn({ err: error, tool }, 'an agent slot was lost (unrenewed past its TTL)'),
        ...adopted
      },
      (error) => log.warn({ err: error, tool }, 'could not refresh an agent slot; Redis unreachable')
    )
  }

  async #take(tool: string, semaphore: Semaphore): Promise<SlotLease | null> {
    const { log } = this.#options
    let acquired: boolean
    try {
      await this.#connected()
      acquired = await semaphore.tryAcquire()
    } catch (error) {
      throw serviceError('SLOTS_UNAVAILABLE', (error as Error).message)
    }
    if (!acquired) return null
    this.#held.set(tool, this.inUse(tool) + 1)
    const notHeldHere = (): void => { this.#held.set(tool, this.inUse(tool) - 1) }
    return leaseOnce(
      () => {
        notHeldHere()
        // If Redis is away, the slot comes back by itself after its TTL.
        semaphore.release().then(
          // Unheard, the runs waiting on other replicas ask again soon enough.
          () => this.#redis.publish(this.#freedChannel(), tool).catch(() => undefined),
          (error: unknown) => log.warn({ err: error, tool }, 'could not release an agent slot')
        )
      },
      semaphore.identifier,
      () => {
        notHeldHere()
        semaphore.stopRefresh()
      }
    )
  }

  async close(): Promise<void> {
    this.#redis.disconnect()
    this.#subscriber?.disconnect()
  }

  #connected(): Promise<void> {
    return whenConnected(this.#redis)
  }

  #freedChannel(): string {
    return `${this.#options.keyPrefix}slots-freed`
  }

  #semaphoreKey(tool: string): string {
    return `${this.#options.keyPrefix}slots:${tool}`
  }

  /** redis-semaphore keeps a semaphore's holders in a sorted set under this key. */
  #setKey(tool: string): string {
    return `semaphore:${this.#semaphoreKey(tool)}`
  }
}

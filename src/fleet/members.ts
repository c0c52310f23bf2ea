import { FormatRegistry } from '@sinclair/typebox'
import { Redis } from 'ioredis'
import { FleetMember } from '../schemas/health.js'
import { freshEntries } from './renewed-hash.js'

// Who is in the fleet (issue 40): each API replica and worker says so in Redis every third of its TTL, so that an
// operator sees the workers an API replica would hand runs to, with what each takes. BullMQ lists the connections of
// its workers, not what they are: this roll is that. A member silent past the TTL is gone from it (killed, its host
// away), the same bound as its runs' locks.

// TypeBox checks a format only once told what it means (Fastify's Ajv knows date-time, TypeBox's Value does not):
// without it, every entry would fail its check and be struck off.
if (!FormatRegistry.Has('date-time')) FormatRegistry.Set('date-time', (value) => !Number.isNaN(Date.parse(value)))

export interface MemberRollOptions {
  url: string
  /** The fleet queues' prefix (BullMQ's): the roll is the hash `<prefix>:members`. */
  prefix: string
  /** Silent this long, a member is gone. */
  ttlMs: number
}

/** The roll as one member keeps it: its own entry renewed, everyone's read. */
export class MemberRoll {
  readonly #redis: Redis
  readonly #key: string
  readonly #ttlMs: number
  #renewal: NodeJS.Timeout | undefined
  #self: Omit<FleetMember, 'last_seen'> | undefined

  constructor({ url, prefix, ttlMs }: MemberRollOptions) {
    // Fails fast rather than queue: a roll that cannot be read is said so by /readyz, not waited on.
    this.#redis = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true })
    this.#redis.on('error', () => undefined)
    this.#key = `${prefix}:members`
    this.#ttlMs = ttlMs
  }

  /**
   * Joins the roll and stays on it while the process lives; `renewed` is told each time Redis took the renewal (a
   * worker's liveness: it reaches the fleet).
   */
  async join(self: Omit<FleetMember, 'last_seen'>, renewed: () => void): Promise<void> {
    this.#self = self
    await this.#redis.connect()
    await this.#renew()
    renewed()
    this.#renewal = setInterval(() => {
      this.#renew().then(renewed, () => undefined)
    }, Math.max(1, Math.floor(this.#ttlMs / 3)))
    this.#renewal.unref()
  }

  /** The members seen within the TTL, longest in the fleet first; the others are struck off as they are found. */
  async list(now = Date.now()): Promise<FleetMember[]> {
    const members = await freshEntries(
      this.#redis, this.#key, this.#ttlMs, FleetMember, (member) => Date.parse(member.last_seen), now
    )
    return members.sort((a, b) => a.started_at.localeCompare(b.started_at) || a.id.localeCompare(b.id))
  }

  /** Leaves the roll at once (a graceful stop), rather than after the TTL. */
  async close(): Promise<void> {
    clearInterval(this.#renewal)
    if (this.#self !== undefined) await this.#redis.hdel(this.#key, this.#self.id).catch(() => undefined)
    this.#redis.disconnect()
  }

  async #renew(): Promise<void> {
    const member: FleetMember = { ...this.#self!, last_seen: new Date().toISOString() }
    await this.#redis.hset(this.#key, member.id, JSON.stringify(member))
  }
}

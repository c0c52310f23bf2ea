import { Type, type TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import { createHash } from 'node:crypto'
import { WEBHOOK_EVENTS } from '../../schemas/webhooks.js'
import type {
  AfterAttempt, DeliveryAttempt, DeliveryState, WebhookDelivery, WebhookOutbox
} from '../../webhooks/outbox.js'

const Nullable = <S extends TSchema>(shape: S) => Type.Union([shape, Type.Null()])

/** One of these strings, typed as their union (a union mapped from an array would be typed string). */
const OneOf = <T extends string>(values: readonly T[]) => Type.Unsafe<T>(Type.Union(values.map((value) =>
  Type.Literal(value))))

const STATES: readonly DeliveryState[] = ['armed', 'pending', 'delivered', 'gone', 'given_up']

/** A delivery as this service writes it: anything else found under its keys is skipped, never obeyed. */
const StoredDelivery = Type.Object({
  id: Type.String(),
  run: Type.String(),
  caller: Type.String(),
  type: OneOf(WEBHOOK_EVENTS),
  url: Type.String(),
  body: Type.String(),
  createdAt: Type.String(),
  replica: Type.String(),
  state: OneOf(STATES),
  attempts: Type.Array(Type.Object({
    at: Type.String(),
    status: Nullable(Type.Integer()),
    error: Nullable(Type.String()),
    durationMs: Type.Number()
  })),
  nextAttemptAt: Nullable(Type.String()),
  push: Type.Optional(Type.Object({
    config: Type.String(),
    headers: Type.Record(Type.String(), Type.String()),
    lostBody: Nullable(Type.String())
  }))
})

/**
 * Writes a delivery only if it is still what was read (its SHA-1), with its place in the indexes: due (scored by its
 * next attempt) or not, never armed again. A delivery ended longer ago than its retention goes at once.
 * KEYS: the delivery, its claim, the due set, the armed ids, its run's ids.
 * ARGV: the SHA-1 read, the delivery to write, its TTL (ms, 0: delete it), its id, its due time (ms; '' when not
 * due), the indexes' TTL (ms), '1' to release the claim.
 */
const WRITE_IF_UNCHANGED = `
local kept = redis.call('get', KEYS[1])
if not kept or redis.sha1hex(kept) ~= ARGV[1] then return 0 end
if tonumber(ARGV[3]) > 0 then
  redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
else
  redis.call('del', KEYS[1])
  redis.call('srem', KEYS[5], ARGV[4])
end
if ARGV[5] == '' then redis.call('zrem', KEYS[3], ARGV[4]) else redis.call('zadd', KEYS[3], ARGV[5], ARGV[4]) end
redis.call('hdel', KEYS[4], ARGV[4])
if ARGV[7] == '1' then redis.call('del', KEYS[2]) end
for index = 3, 5 do redis.call('pexpire', KEYS[index], ARGV[6]) end
return 1`

/** Only the holder's own claim: one that lapsed and was taken since is the new holder's. */
const RELEASE_IF_HELD = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"

/** Writes that lose a race this often in a row (a claim lapsed mid-attempt, at most) are given up as an error. */
const MAX_WRITES = 10

const sha1 = (text: string): string => createHash('sha1').update(text).digest('hex')

export interface RedisOutboxOptions {
  redis: Redis
  keyPrefix: string
  /** An armed or pending delivery's keys live this long after each write: past the longest run, or wait to retry. */
  keepPendingMs: number
  /** An ended delivery is kept this long after its last attempt, as finished runs are. */
  retentionMs: number
  /** The key a live replica keeps: the store's heartbeat. */
  replicaKey: (replica: string) => string
  /** The store's way to Redis: waits for its connection, and makes its failures RUNS_UNAVAILABLE. */
  call: <T>(operation: () => Promise<T>) => Promise<T>
  log: FastifyBaseLogger
}

/**
 * Deliveries in the fleet's Redis, beside its runs: any replica delivers what is due, one at a time (a claim per
 * attempt), and fires as lost the armed deliveries of a replica that stopped saying it is alive. Each delivery is a
 * JSON key; a sorted set of the pending ones by next attempt, a hash of the armed ones (id: replica) and a set per
 * run index them. Every key expires, so nothing a dead fleet left stays in Redis for good.
 */
export class RedisOutbox implements WebhookOutbox {
  readonly #options: RedisOutboxOptions
  readonly #redis: Redis

  constructor(options: RedisOutboxOptions) {
    this.#options = options
    this.#redis = options.redis
  }

  async addDeliveries(deliveries: readonly WebhookDelivery[]): Promise<void> {
    const { keepPendingMs } = this.#options
    await this.#options.call(async () => {
      const batch = this.#redis.multi()
      for (const delivery of deliveries) {
        const ttl = this.#ttlOf(delivery)
        if (ttl > 0) batch.set(this.#key(delivery.id), JSON.stringify(delivery), 'PX', ttl)
        if (delivery.state === 'pending') batch.zadd(this.#dueKey(), Date.parse(delivery.nextAttemptAt!), delivery.id)
        if (delivery.state === 'armed') batch.hset(this.#armedKey(), delivery.id, delivery.replica)
        batch.sadd(this.#runKey(delivery.run), delivery.id).pexpire(this.#runKey(delivery.run), keepPendingMs)
      }
      batch.pexpire(this.#dueKey(), keepPendingMs).pexpire(this.#armedKey(), keepPendingMs)
      everyCommandDone(await batch.exec())
    })
  }

  async dropDelivery(id: string): Promise<void> {
    await this.#options.call(() => this.#update(id, false, (delivery) =>
      delivery.state === 'armed' || delivery.state === 'pending'
        ? { ...delivery, state: 'gone', nextAttemptAt: null }
        : undefined
    ))
  }

  async fireDelivery(id: string, body: string, at: Date): Promise<void> {
    await this.#options.call(() => this.#update(id, false, (delivery) =>
      delivery.state === 'armed' ? { ...delivery, body, state: 'pending', nextAttemptAt: at.toISOString() } : undefined
    ))
  }

  async dueDeliveries(now: Date, max: number): Promise<WebhookDelivery[]> {
    return this.#options.call(async () => {
      const ids = await this.#redis.zrangebyscore(this.#dueKey(), '-inf', now.getTime(), 'LIMIT', 0, max)
      const { found, unknown } = await this.#read(ids)
      // Or they would stand first in line at every poll, and keep what is due behind them.
      if (unknown.length > 0) await this.#redis.zrem(this.#dueKey(), ...unknown)
      return found
        .filter(({ state, nextAttemptAt }) =>
          state === 'pending' && nextAttemptAt !== null && Date.parse(nextAttemptAt) <= now.getTime())
        .sort((a, b) => a.nextAttemptAt!.localeCompare(b.nextAttemptAt!) || a.createdAt.localeCompare(b.createdAt))
    })
  }

  async orphanedDeliveries(): Promise<WebhookDelivery[]> {
    return this.#options.call(async () => {
      const armed = await this.#redis.hgetall(this.#armedKey())
      const replicas = [...new Set(Object.values(armed))]
      if (replicas.length === 0) return []
      const alive = await this.#redis.mget(...replicas.map((replica) => this.#options.replicaKey(replica)))
      const dead = new Set(replicas.filter((_, index) => alive[index] === null))
      const { found, unknown } = await this.#read(Object.keys(armed).filter((id) => dead.has(armed[id]!)))
      if (unknown.length > 0) await this.#redis.hdel(this.#armedKey(), ...unknown)
      return found
        .filter((delivery) => delivery.state === 'armed' && dead.has(delivery.replica))
        .sort((a, b) => a.createdAt.localeCompare(b.createdAt))
    })
  }

  async claimDelivery(id: string, holder: string, ttlMs: number): Promise<boolean> {
    return (await this.#options.call(() => this.#redis.set(this.#claimKey(id), holder, 'PX', ttlMs, 'NX'))) === 'OK'
  }

  async releaseDelivery(id: string, holder: string): Promise<void> {
    await this.#options.call(() => this.#redis.eval(RELEASE_IF_HELD, 1, this.#claimKey(id), holder))
  }

  async recordAttempt(id: string, attempt: DeliveryAttempt, after: AfterAttempt): Promise<void> {
    await this.#options.call(() => this.#update(id, true, (delivery) =>
      ({ ...delivery, attempts: [...delivery.attempts, attempt], ...after })
    ))
  }

  async deliveriesOf(run: string): Promise<WebhookDelivery[]> {
    return this.#options.call(async () => {
      const ids = await this.#redis.smembers(this.#runKey(run))
      const { found, missing } = await this.#read(ids)
      if (missing.length > 0) await this.#redis.srem(this.#runKey(run), ...missing)
      return found.filter((delivery) => delivery.run === run).sort((a, b) => a.createdAt.localeCompare(b.createdAt))
    })
  }

  async pendingDeliveries(): Promise<number> {
    return this.#options.call(() => this.#redis.zcard(this.#dueKey()))
  }

  /**
   * Read, changed, written back unless another replica wrote it meanwhile (then read again). `change` answers
   * undefined to leave it as it is; one missing, or not this service's, is left alone too.
   */
  async #update(
    id: string,
    releaseClaim: boolean,
    change: (delivery: WebhookDelivery) => WebhookDelivery | undefined
  ): Promise<void> {
    const { keepPendingMs } = this.#options
    for (let write = 0; write < MAX_WRITES; write++) {
      const text = await this.#redis.get(this.#key(id))
      const read = text === null ? undefined : this.#parsed(id, text)
      const changed = read === undefined ? undefined : change(read)
      if (changed === undefined) {
        if (releaseClaim) await this.#redis.del(this.#claimKey(id))
        return
      }
      const dueAt = changed.state === 'pending' ? String(Date.parse(changed.nextAttemptAt!)) : ''
      const written = await this.#redis.eval(
        WRITE_IF_UNCHANGED, 5,
        this.#key(id), this.#claimKey(id), this.#dueKey(), this.#armedKey(), this.#runKey(changed.run),
        sha1(text!), JSON.stringify(changed), Math.max(0, this.#ttlOf(changed)), id, dueAt, keepPendingMs,
        releaseClaim ? '1' : '0'
      )
      if (written === 1) return
    }
    throw new Error(`webhook delivery ${id} kept changing as it was written`)
  }

  /** The deliveries of these ids that this service wrote; `unknown`: the others, `missing` (expired) among them. */
  async #read(ids: string[]): Promise<{ found: WebhookDelivery[]; unknown: string[]; missing: string[] }> {
    const found: WebhookDelivery[] = []
    const unknown: string[] = []
    const missing: string[] = []
    if (ids.length === 0) return { found, unknown, missing }
    const texts = await this.#redis.mget(...ids.map((id) => this.#key(id)))
    ids.forEach((id, index) => {
      const text = texts[index] ?? null
      const delivery = text === null ? undefined : this.#parsed(id, text)
      if (delivery !== undefined) found.push(delivery)
      else unknown.push(id)
      if (text === null) missing.push(id)
    })
    return { found, unknown, missing }
  }

  #parsed(id: string, text: string): WebhookDelivery | undefined {
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      value = undefined
    }
    if (Value.Check(StoredDelivery, value) && value.id === id) return value
    this.#options.log.warn({ webhook: id }, 'a webhook delivery in Redis is not one this service wrote: skipped')
    return undefined
  }

  /** Armed or pending: past the longest wait; ended: its retention from its last attempt (0 once past). */
  #ttlOf(delivery: WebhookDelivery): number {
    if (delivery.state === 'armed' || delivery.state === 'pending') return this.#options.keepPendingMs
    const last = delivery.attempts.at(-1)
    return last === undefined
      ? this.#options.retentionMs
      : Math.ceil(this.#options.retentionMs - (Date.now() - Date.parse(last.at)))
  }

  #key(id: string): string {
    return `${this.#options.keyPrefix}webhook:${id}`
  }

  #claimKey(id: string): string {
    return `${this.#options.keyPrefix}webhook:${id}:claim`
  }

  #dueKey(): string {
    return `${this.#options.keyPrefix}webhooks:due`
  }

  #armedKey(): string {
    return `${this.#options.keyPrefix}webhooks:armed`
  }

  #runKey(run: string): string {
    return `${this.#options.keyPrefix}webhooks:run:${run}`
  }
}

/** As the store's: EXEC succeeds even when one of its commands failed. */
function everyCommandDone(results: Array<[Error | null, unknown]> | null): void {
  if (results === null) throw new Error('the transaction was discarded')
  const failed = results.find(([error]) => error !== null)
  if (failed !== undefined) throw failed[0]!
}

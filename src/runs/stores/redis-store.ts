import type { Static, TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import { serviceError } from '../../errors.js'
import { createRedis, whenConnected } from '../../redis-client.js'
import { RunResult, resultFromStore, TIMEOUT_MAX_SECONDS } from '../../schemas/run.js'
import { MAX_RETRY_DELAY_MS } from '../../webhooks/schedule.js'
import type { StoredEvent } from '../event-log.js'
import { RedisOutbox } from './redis-outbox.js'
import { RedisSpendLedger } from './spend-ledgers.js'
import {
  isFreshSession, RunRecordHead, SessionRecord, sessionKey, type RetentionOptions, type RunRecord, type RunStore
} from './run-store.js'

export interface RedisRunStoreOptions extends RetentionOptions {
  url: string
  keyPrefix: string
  /** A replica that stops saying it is alive for this long is dead: its running runs are lost. */
  ttlMs: number
  /** How long a Redis command may take (REDIS_TIMEOUT_MS); the client's default when absent. */
  timeoutMs?: number
  replica: string
  log: FastifyBaseLogger
}

/** An event as a sorted-set member: where its output starts and ends, then its frame. The score is its id. */
const HEADER_BYTES = 16

function encodeMember(event: StoredEvent): Buffer {
  const member = Buffer.allocUnsafe(HEADER_BYTES + event.frame.length)
  member.writeDoubleBE(event.offset, 0)
  member.writeDoubleBE(event.end, 8)
  event.frame.copy(member, HEADER_BYTES)
  return member
}

function listingOf({ result: _result, ...listing }: RunRecord): Omit<RunRecord, 'result'> {
  return listing
}

/** A run's or a session's caller was named `owner` in what 0.1.0 wrote. */
function callerNamed(stored: unknown): unknown {
  if (typeof stored !== 'object' || stored === null || !('owner' in stored) || 'caller' in stored) return stored
  const { owner, ...rest } = stored
  return { ...rest, caller: owner }
}

function decodeMember(id: number, member: Buffer): StoredEvent {
  return { id, offset: member.readDoubleBE(0), end: member.readDoubleBE(8), frame: member.subarray(HEADER_BYTES) }
}

/** The parsed value, if it is what this service writes; a record anything else wrote is skipped, never obeyed. */
function parsedAs<S extends TSchema>(
  shape: S,
  text: string,
  upgrade: (stored: unknown) => unknown
): Static<S> | undefined {
  try {
    const value = upgrade(JSON.parse(text))
    return Value.Check(shape, value) ? value : undefined
  } catch {
    return undefined
  }
}

/**
 * A transaction's commands each answer on their own: EXEC succeeds even when one of them failed (a key of another type,
 * an out-of-memory refusal), so a write that did not happen must be told here.
 */
function everyCommandDone(results: Array<[Error | null, unknown]> | null): void {
  if (results === null) throw new Error('the transaction was discarded')
  const failed = results.find(([error]) => error !== null)
  if (failed !== undefined) throw failed[0]!
}

/** Deletes a claim only if it is still the caller's. */
const RELEASE_IF_HELD = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"

/**
 * Keeps a session for its caller only: an id already another caller's (or held in a record this service did not
 * write) is left as it is, 0; 0.1.0 named the caller `owner`. The caller's index, scored by last use, drops what has
 * expired and, past the cap, the least recent sessions with their records.
 * KEYS: the session, the caller's index. ARGV: the record, its caller, retention (ms), now (ms), the cap.
 */
const SAVE_SESSION_IF_CALLERS = `
local kept = redis.call('get', KEYS[1])
if kept then
  local decoded, record = pcall(cjson.decode, kept)
  if not decoded or type(record) ~= 'table' or (record.caller or record.owner) ~= ARGV[2] then return 0 end
end
local retention, now = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('set', KEYS[1], ARGV[1], 'PX', retention)
redis.call('zadd', KEYS[2], now, KEYS[1])
redis.call('zremrangebyscore', KEYS[2], '-inf', now - retention)
local excess = redis.call('zcard', KEYS[2]) - tonumber(ARGV[5])
if excess > 0 then
  for _, key in ipairs(redis.call('zrange', KEYS[2], 0, excess - 1)) do redis.call('del', key) end
  redis.call('zremrangebyrank', KEYS[2], 0, excess - 1)
end
redis.call('pexpire', KEYS[2], retention)
return 1`

/** A subscription refused (the connection flushed its queue) is asked for again this long after. */
const RESUBSCRIBE_DELAY_MS = 1000

/**
 * Runs shared by a fleet through the Redis its slots already use, so that any replica answers for any run: its record,
 * its events (live, as the replica running it saves them), and DELETE (passed to that replica over pub/sub). Events are
 * a sorted set scored by id rather than a stream: the log drops a range in the middle (between its head and its tail),
 * which a sorted set removes exactly and a stream's trimming (oldest first) cannot.
 */
export class RedisRunStore implements RunStore {
  readonly kind = 'redis'
  readonly outbox: RedisOutbox
  readonly spend: RedisSpendLedger
  readonly #redis: Redis
  readonly #options: RedisRunStoreOptions
  #subscriber: Redis | undefined
  #closed = false
  readonly #heartbeat: NodeJS.Timeout

  constructor(options: RedisRunStoreOptions) {
    this.#options = options
    this.#redis = createRedis(options.url, options.log, options.timeoutMs)
    this.outbox = new RedisOutbox({
      redis: this.#redis,
      keyPrefix: options.keyPrefix,
      // Each write keeps an armed delivery past its run, a pending one past the longest wait between two attempts,
      // and both then as long as a run is kept: the fleet may be down a while meanwhile.
      keepPendingMs: this.#runningTtlMs + MAX_RETRY_DELAY_MS,
      retentionMs: options.retentionMs,
      // A replica's runs and its armed deliveries are lost alike, once this key is gone.
      replicaKey: (replica) => this.#replicaKey(replica),
      call: (operation) => this.#call(operation),
      log: options.log
    })
    this.spend = new RedisSpendLedger({
      redis: this.#redis, keyPrefix: options.keyPrefix, call: (operation) => this.#call(operation)
    })
    const beat = (): void => {
      this.#redis
        .set(this.#replicaKey(options.replica), '1', 'PX', options.ttlMs)
        .catch((error: unknown) => options.log.warn({ err: error }, 'could not tell the fleet this replica is alive'))
    }
    this.#heartbeat = setInterval(beat, Math.max(1, Math.floor(options.ttlMs / 3)))
  }

  /**
   * Says this replica is alive before it takes any run. A fleet has no 'previous life' of its own: a dead replica's
   * runs are found lost by whichever replica reads them next.
   */
  async recover(): Promise<string[]> {
    const { replica, ttlMs } = this.#options
    // Redis away at start is no reason not to start: the heartbeat says it once Redis is back, and runs get 503 till
    // then.
    await this.#call(() => this.#redis.set(this.#replicaKey(replica), '1', 'PX', ttlMs)).catch((error: unknown) =>
      this.#options.log.warn({ err: error }, 'the run store is not reachable yet')
    )
    return []
  }

  /**
   * Every key expires: a running run's keys outlive the longest run and its retention, so a run whose replica died and
   * that nobody ever reads again does not stay in Redis for good.
   */
  get #runningTtlMs(): number {
    return TIMEOUT_MAX_SECONDS * 1000 + this.#options.retentionMs
  }

  async saveSession(session: SessionRecord): Promise<boolean> {
    const { sessionsRetentionMs, sessionsMaxPerOwner, keyPrefix } = this.#options
    // The index keeps the key 0.1.0 gave it: its sessions stay counted against their caller's cap.
    const callersIndex = `${keyPrefix}sessions:owner:${session.caller}`
    const kept = await this.#call(() => this.#redis.eval(
      SAVE_SESSION_IF_CALLERS, 2, this.#sessionKey(session.tool, session.id), callersIndex,
      JSON.stringify(session), session.caller, sessionsRetentionMs, Date.parse(session.updatedAt), sessionsMaxPerOwner
    ))
    return kept === 1
  }

  async session(tool: string, id: string): Promise<SessionRecord | undefined> {
    const text = await this.#call(() => this.#redis.get(this.#sessionKey(tool, id)))
    const session = text === null ? undefined : this.#valid(SessionRecord, text, id, callerNamed)
    return session !== undefined && isFreshSession(session, this.#options.sessionsRetentionMs) ? session : undefined
  }

  async claimSession(tool: string, id: string, holder: string, ttlMs: number): Promise<boolean> {
    const key = `${this.#sessionKey(tool, id)}:claim`
    return (await this.#call(() => this.#redis.set(key, holder, 'PX', ttlMs, 'NX'))) === 'OK'
  }

  async releaseSession(tool: string, id: string, holder: string): Promise<void> {
    // Only its own claim: one that lapsed and was taken since is the new holder's.
    await this.#call(() => this.#redis.eval(RELEASE_IF_HELD, 1, `${this.#sessionKey(tool, id)}:claim`, holder))
  }

  async create(record: RunRecord): Promise<void> {
    const ttl = this.#runningTtlMs
    await this.#call(() =>
      this.#redis
        .multi()
        .set(this.#runKey(record.id), JSON.stringify(listingOf(record)), 'PX', ttl)
        .zadd(this.#ownerKey(record.caller), Date.parse(record.createdAt), record.id)
        // Each new run pushes its owner's index past the end of every run in it.
        .pexpire(this.#ownerKey(record.caller), ttl)
        .exec()
        .then(everyCommandDone)
    )
  }

  async saveEvents(
    id: string,
    events: StoredEvent[],
    dropped: { after: number; before: number } | undefined
  ): Promise<void> {
    const key = this.#eventsKey(id)
    await this.#call(() => {
      const batch = this.#redis.multi()
      if (dropped !== undefined) batch.zremrangebyscore(key, `(${dropped.after}`, `(${dropped.before}`)
      if (events.length > 0) batch.zadd(key, ...events.flatMap((event) => [event.id, encodeMember(event)] as const))
      batch.pexpire(key, this.#runningTtlMs)
      return batch.exec().then(everyCommandDone)
    })
  }

  async finish(record: RunRecord): Promise<void> {
    const { retentionMs, maxFinished } = this.#options
    await this.#call(async () => {
      await this.#redis
        .multi()
        .set(this.#runKey(record.id), JSON.stringify(listingOf(record)), 'PX', retentionMs)
        .set(this.#resultKey(record.id), JSON.stringify(record.result), 'PX', retentionMs)
        .pexpire(this.#eventsKey(record.id), retentionMs)
        .zadd(this.#finishedKey(), Date.parse(record.finishedAt!), record.id)
        .pexpire(this.#finishedKey(), retentionMs)
        .exec()
        .then(everyCommandDone)
      // The oldest finished runs past the count go (those past their age expire by themselves).
      const excess = (await this.#redis.zcard(this.#finishedKey())) - maxFinished
      if (excess <= 0) return
      const oldest = await this.#redis.zpopmin(this.#finishedKey(), excess)
      const ids = oldest.filter((_, index) => index % 2 === 0)
      if (ids.length > 0) {
        await this.#redis.del(...ids.flatMap((id) => [this.#runKey(id), this.#resultKey(id), this.#eventsKey(id)]))
      }
    })
  }

  async get(id: string): Promise<RunRecord | undefined> {
    return this.#call(async () => {
      const [stored, result] = await this.#redis.mget(this.#runKey(id), this.#resultKey(id))
      if (stored === null || stored === undefined) return undefined
      const listing = this.#valid(RunRecordHead, stored, id, callerNamed)
      if (listing === undefined) return undefined
      const known = await this.#unlessLost(listing)
      const parsed = typeof result === 'string' ? this.#valid(RunResult, result, id, resultFromStore) : null
      return { ...known, result: parsed ?? null }
    })
  }

  async list(caller: string): Promise<Array<Omit<RunRecord, 'result'>>> {
    return this.#call(async () => {
      const ownerKey = this.#ownerKey(caller)
      const ids = await this.#redis.zrevrange(ownerKey, 0, -1)
      if (ids.length === 0) return []
      const stored = await this.#redis.mget(...ids.map((id) => this.#runKey(id)))
      // Runs past retention have expired: their ids leave the owner's index too.
      const expired = ids.filter((_, index) => stored[index] === null)
      if (expired.length > 0) await this.#redis.zrem(ownerKey, ...expired)
      // Only what this service wrote, and only the owner's: an entry someone else put in the index shows nothing.
      const listings = stored.flatMap((value, index) => {
        const listing = value === null ? undefined : this.#valid(RunRecordHead, value, ids[index]!, callerNamed)
        return listing?.caller === caller ? [listing] : []
      })
      return Promise.all(listings.map((listing) => this.#unlessLost(listing)))
    })
  }

  async events(id: string, lastId: number, max: number): Promise<StoredEvent[]> {
    return this.#call(async () => {
      const flat = await this.#redis.zrangebyscoreBuffer(
        this.#eventsKey(id), `(${lastId}`, '+inf', 'WITHSCORES', 'LIMIT', 0, max
      )
      const events: StoredEvent[] = []
      for (let index = 0; index < flat.length; index += 2) {
        events.push(decodeMember(Number(flat[index + 1]!.toString()), flat[index]!))
      }
      return events
    })
  }

  async requestCancel(record: RunRecord): Promise<void> {
    await this.#call(() => this.#redis.publish(this.#cancelChannel(), record.id))
  }

  onCancelRequest(listener: (id: string) => void): void {
    // Unlike commands, the subscription waits for a connection (made at start, made again after each reconnection),
    // and without the commands' timeout: a ready check timed out on a busy Redis would drop the queued SUBSCRIBE with
    // it, and ioredis only makes again the subscriptions it has seen succeed. Cancel requests would go unheard for
    // good.
    const subscriber = this.#redis.duplicate({
      enableOfflineQueue: true,
      maxRetriesPerRequest: null,
      commandTimeout: undefined
    })
    subscriber.on('error', (error) => this.#options.log.debug({ err: error }, 'redis subscriber error'))
    subscriber.on('message', (_channel: string, id: string) => listener(id))
    const subscribe = (): void => {
      subscriber.subscribe(this.#cancelChannel()).catch((error: unknown) => {
        if (this.#closed) return
        this.#options.log.warn({ err: error }, 'could not subscribe to cancellations; trying again')
        setTimeout(subscribe, RESUBSCRIBE_DELAY_MS).unref()
      })
    }
    subscribe()
    this.#subscriber = subscriber
  }

  async close(): Promise<void> {
    this.#closed = true
    clearInterval(this.#heartbeat)
    await this.#redis.del(this.#replicaKey(this.#options.replica)).catch(() => undefined)
    this.#subscriber?.disconnect()
    this.#redis.disconnect()
  }

  /**
   * A running (or queued) run whose replica stopped saying it is alive will never end: it is lost, for every reader
   * alike.
   */
  async #unlessLost(listing: Omit<RunRecord, 'result'>): Promise<Omit<RunRecord, 'result'>> {
    if (listing.status !== 'running' && listing.status !== 'queued') return listing
    if ((await this.#redis.exists(this.#replicaKey(listing.replica))) === 1) return listing
    const { queuePosition: _place, ...unqueued } = listing
    const lost: RunRecord = { ...unqueued, status: 'lost', finishedAt: new Date().toISOString(), result: null }
    this.#options.log.warn({ run: listing.id, replica: listing.replica }, 'run lost: its replica is gone')
    await this.finish(lost)
    return listingOf(lost)
  }

  /** `upgrade`: what an older version of this service wrote, made what this one reads (fields added since). */
  #valid<S extends TSchema>(
    shape: S,
    text: string,
    id: string,
    upgrade: (stored: unknown) => unknown
  ): Static<S> | undefined {
    const value = parsedAs(shape, text, upgrade)
    if (value === undefined) {
      this.#options.log.warn({ run: id }, 'a record in Redis is not one this service wrote: skipped')
    }
    return value
  }

  async #call<T>(operation: () => Promise<T>): Promise<T> {
    try {
      await whenConnected(this.#redis)
      return await operation()
    } catch (error) {
      throw serviceError('RUNS_UNAVAILABLE', (error as Error).message)
    }
  }

  #sessionKey(tool: string, id: string): string {
    return `${this.#options.keyPrefix}session:${sessionKey(tool, id)}`
  }

  #runKey(id: string): string {
    return `${this.#options.keyPrefix}run:${id}`
  }

  /** Apart from the record, so that listing runs never reads results (each up to the output limit). */
  #resultKey(id: string): string {
    return `${this.#options.keyPrefix}run:${id}:result`
  }

  #eventsKey(id: string): string {
    return `${this.#options.keyPrefix}run:${id}:events`
  }

  #ownerKey(owner: string): string {
    return `${this.#options.keyPrefix}runs:owner:${owner}`
  }

  #finishedKey(): string {
    return `${this.#options.keyPrefix}runs:finished`
  }

  #replicaKey(replica: string): string {
    return `${this.#options.keyPrefix}replica:${replica}`
  }

  #cancelChannel(): string {
    return `${this.#options.keyPrefix}runs:cancel`
  }
}

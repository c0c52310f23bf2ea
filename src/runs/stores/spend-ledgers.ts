import type BetterSqlite3 from 'better-sqlite3'
import type { Redis } from 'ioredis'
import { createHash } from 'node:crypto'
import { SPEND_WINDOW_MS, type SpendLedger } from './run-store.js'

/** This process's memory: a restart forgets what was spent. */
export class MemorySpendLedger implements SpendLedger {
  readonly #spent = new Map<string, Array<{ at: number; cost: number }>>()

  async spentSince(caller: string, since: Date): Promise<number> {
    const entries = this.#spent.get(caller) ?? []
    return entries.filter((entry) => entry.at >= since.getTime()).reduce((sum, entry) => sum + entry.cost, 0)
  }

  async record(caller: string, _run: string, costUsd: number, at: Date): Promise<void> {
    const kept = (this.#spent.get(caller) ?? []).filter((entry) => entry.at >= at.getTime() - SPEND_WINDOW_MS)
    this.#spent.set(caller, [...kept, { at: at.getTime(), cost: costUsd }])
  }
}

const SPEND_SCHEMA = `
  CREATE TABLE IF NOT EXISTS spend (
    caller TEXT NOT NULL,
    run TEXT NOT NULL,
    at INTEGER NOT NULL,
    cost_usd REAL NOT NULL
  );
  CREATE INDEX IF NOT EXISTS spend_by_caller ON spend (caller, at);
  CREATE INDEX IF NOT EXISTS spend_by_time ON spend (at);
`

/** In the run store's SQLite file: a restart keeps the day's spend. */
export class SqliteSpendLedger implements SpendLedger {
  readonly #statements

  constructor(db: BetterSqlite3.Database) {
    db.exec(SPEND_SCHEMA)
    this.#statements = {
      sum: db.prepare<[string, number], { spent: number }>(
        'SELECT COALESCE(SUM(cost_usd), 0) AS spent FROM spend WHERE caller = ? AND at >= ?'
      ),
      insert: db.prepare<[string, string, number, number]>(
        'INSERT INTO spend (caller, run, at, cost_usd) VALUES (?, ?, ?, ?)'
      ),
      prune: db.prepare<[number]>('DELETE FROM spend WHERE at < ?')
    }
  }

  async spentSince(caller: string, since: Date): Promise<number> {
    return this.#statements.sum.get(caller, since.getTime())!.spent
  }

  async record(caller: string, run: string, costUsd: number, at: Date): Promise<void> {
    this.#statements.insert.run(caller, run, at.getTime(), costUsd)
    this.#statements.prune.run(at.getTime() - SPEND_WINDOW_MS)
  }
}

export interface RedisSpendLedgerOptions {
  redis: Redis
  keyPrefix: string
  /** Bounds a Redis call in time, as every call of the store is. */
  call: <T>(operation: () => Promise<T>) => Promise<T>
}

/**
 * In the fleet's Redis: every replica adds to and reads one ledger per token, a sorted set of `<run>:<dollars>` scored
 * by when each run ended. A member that is not one this service writes counts nothing.
 */
export class RedisSpendLedger implements SpendLedger {
  readonly #options: RedisSpendLedgerOptions

  constructor(options: RedisSpendLedgerOptions) {
    this.#options = options
  }

  async spentSince(caller: string, since: Date): Promise<number> {
    const { redis, call } = this.#options
    const members = await call(() => redis.zrangebyscore(this.#key(caller), since.getTime(), '+inf'))
    return members.reduce((sum, member) => sum + costOf(member), 0)
  }

  async record(caller: string, run: string, costUsd: number, at: Date): Promise<void> {
    const { redis, call } = this.#options
    const key = this.#key(caller)
    await call(() => redis.multi()
      .zadd(key, at.getTime(), `${run}:${costUsd}`)
      .zremrangebyscore(key, '-inf', `(${at.getTime() - SPEND_WINDOW_MS}`)
      .pexpire(key, 2 * SPEND_WINDOW_MS)
      .exec())
  }

  /** A token's name as a key of fixed form, whatever it holds. */
  #key(caller: string): string {
    return `${this.#options.keyPrefix}spend:${createHash('sha256').update(caller).digest('hex')}`
  }
}

function costOf(member: string): number {
  const cost = Number(member.slice(member.lastIndexOf(':') + 1))
  return Number.isFinite(cost) && cost >= 0 ? cost : 0
}

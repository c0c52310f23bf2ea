import type { StoredEvent } from '../event-log.js'
import {
  byNewest, isFreshSession, isRetained, sessionKey, type RetentionOptions, type RunRecord,
  type RunStore, type SessionRecord
} from './run-store.js'
import { LocalClaims } from './local-claims.js'
import { MemoryOutbox } from './memory-outbox.js'
import { MemorySpendLedger } from './spend-ledgers.js'

interface Entry {
  record: RunRecord
  events: StoredEvent[]
}

/** Runs in this process's memory only: a restart forgets them. For tests, and where nothing may be written to disk. */
export class MemoryRunStore implements RunStore {
  readonly kind = 'memory'
  readonly outbox: MemoryOutbox
  readonly spend = new MemorySpendLedger()
  readonly #entries = new Map<string, Entry>()
  readonly #retention: RetentionOptions
  readonly #sessions = new Map<string, SessionRecord>()
  readonly #claims = new LocalClaims()

  constructor(retention: RetentionOptions) {
    this.#retention = retention
    this.outbox = new MemoryOutbox(retention.retentionMs)
  }

  async saveSession(session: SessionRecord): Promise<boolean> {
    for (const [key, kept] of this.#sessions) {
      if (!isFreshSession(kept, this.#retention.sessionsRetentionMs)) this.#sessions.delete(key)
    }
    const key = sessionKey(session.tool, session.id)
    const kept = this.#sessions.get(key)
    if (kept !== undefined && kept.caller !== session.caller) return false
    // A Map iterates in insertion order: deleted and set again, a session becomes its caller's most recent.
    this.#sessions.delete(key)
    this.#sessions.set(key, { ...session })
    const callers = [...this.#sessions].filter(([, each]) => each.caller === session.caller)
    for (const [oldest] of callers.slice(0, Math.max(0, callers.length - this.#retention.sessionsMaxPerOwner))) {
      this.#sessions.delete(oldest)
    }
    return true
  }

  async session(tool: string, id: string): Promise<SessionRecord | undefined> {
    const session = this.#sessions.get(sessionKey(tool, id))
    return session !== undefined && isFreshSession(session, this.#retention.sessionsRetentionMs)
      ? { ...session }
      : undefined
  }

  async claimSession(tool: string, id: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.#claims.claim(sessionKey(tool, id), holder, ttlMs)
  }

  async releaseSession(tool: string, id: string, holder: string): Promise<void> {
    this.#claims.release(sessionKey(tool, id), holder)
  }

  async recover(): Promise<string[]> {
    return []
  }

  async create(record: RunRecord): Promise<void> {
    this.#entries.set(record.id, { record: { ...record }, events: [] })
  }

  async saveEvents(
    id: string,
    events: StoredEvent[],
    dropped: { after: number; before: number } | undefined
  ): Promise<void> {
    const entry = this.#entries.get(id)
    if (entry === undefined) return
    if (dropped !== undefined) {
      entry.events = entry.events.filter((event) => event.id <= dropped.after || event.id >= dropped.before)
    }
    entry.events.push(...events)
  }

  async finish(record: RunRecord): Promise<void> {
    const entry = this.#entries.get(record.id)
    if (entry !== undefined) entry.record = { ...record }
    this.#prune()
  }

  async get(id: string): Promise<RunRecord | undefined> {
    const record = this.#entries.get(id)?.record
    return record !== undefined && isRetained(record, this.#retention.retentionMs) ? { ...record } : undefined
  }

  async list(caller: string): Promise<Array<Omit<RunRecord, 'result'>>> {
    return [...this.#entries.values()]
      .map(({ record }) => record)
      .filter((record) => record.caller === caller && isRetained(record, this.#retention.retentionMs))
      .map(({ result: _result, ...listing }) => listing)
      .sort(byNewest)
  }

  async events(id: string, lastId: number, max: number): Promise<StoredEvent[]> {
    const events = this.#entries.get(id)?.events ?? []
    return events.filter((event) => event.id > lastId).slice(0, max)
  }

  async requestCancel(): Promise<void> {}

  onCancelRequest(): void {}

  async close(): Promise<void> {}

  /** The oldest finished runs past the count go, and those past their age. */
  #prune(): void {
    const finished = [...this.#entries.values()]
      .filter(({ record }) => record.finishedAt !== null)
      .map(({ record }) => record)
    finished.sort((a, b) => b.finishedAt!.localeCompare(a.finishedAt!))
    for (const [index, record] of finished.entries()) {
      if (index >= this.#retention.maxFinished || !isRetained(record, this.#retention.retentionMs)) {
        this.#entries.delete(record.id)
      }
    }
  }
}

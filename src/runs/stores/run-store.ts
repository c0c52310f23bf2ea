import { Type, type Static } from '@sinclair/typebox'
import type { RunResult } from '../../schemas/run.js'
import { RunStatus } from '../../schemas/runs.js'
import type { StoredEvent } from '../event-log.js'

/**
 * An async run as every replica and every later life of the service sees it, but its result: kept (and read back, and
 * checked) on its own, since it may be as large as the output limit and a listing never needs it.
 */
export const RunRecordHead = Type.Object({
  id: Type.String(),
  owner: Type.String({ description: 'The name of the token that created it: other callers neither see nor reach it.' }),
  tool: Type.String(),
  status: RunStatus,
  createdAt: Type.String(),
  finishedAt: Type.Union([Type.String(), Type.Null()]),
  replica: Type.String({ description: 'The service process running it: only that one can stop its agent.' })
})
export type RunRecord = Static<typeof RunRecordHead> & { result: RunResult | null }

/** Where async runs are kept: their record, and their kept events, also after their agent has ended. */
export interface RunStore {
  /** What 'auto' chose, for the startup log and /readyz. */
  readonly kind: 'memory' | 'sqlite' | 'redis'
  /**
   * Runs that a previous life of this replica left running can no longer be finished: they become `lost`, with the
   * events they had saved. Returns their ids.
   */
  recover(): Promise<string[]>
  create(record: RunRecord): Promise<void>
  /** The run's events kept since the last save, and the range its log dropped meanwhile (forgotten here too). */
  saveEvents(id: string, events: StoredEvent[], dropped: { after: number; before: number } | undefined): Promise<void>
  /** The run has ended: its final record (its events were saved just before). */
  finish(record: RunRecord): Promise<void>
  /** undefined once unknown or past retention. */
  get(id: string): Promise<RunRecord | undefined>
  /**
   * The owner's runs still retained, newest first, without their results (a result may be as large as the output
   * limit).
   */
  list(owner: string): Promise<Array<Omit<RunRecord, 'result'>>>
  /** Up to `max` kept events after event `lastId`, in order. */
  events(id: string, lastId: number, max: number): Promise<StoredEvent[]>
  /** Fleet: asks the replica running it to stop it (resolves once asked, not once stopped). */
  requestCancel(record: RunRecord): Promise<void>
  /** Fleet: called with the id of a run of this replica that another replica was asked to stop. */
  onCancelRequest(listener: (id: string) => void): void
  close(): Promise<void>
}

export interface RetentionOptions {
  retentionMs: number
  maxFinished: number
}

/** A finished run is kept while it is recent enough. */
export const isRetained = (record: Pick<RunRecord, 'finishedAt'>, retentionMs: number, now = Date.now()): boolean =>
  record.finishedAt === null || now - Date.parse(record.finishedAt) <= retentionMs

type Created = Pick<RunRecord, 'createdAt'>
export const byNewest = (a: Created, b: Created): number => b.createdAt.localeCompare(a.createdAt)

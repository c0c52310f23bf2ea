import { Type, type Static } from '@sinclair/typebox'
import type { RunResult } from '../../schemas/run.js'
import { RunError, RunStatus } from '../../schemas/runs.js'
import { ListedWebhook } from '../../schemas/webhooks.js'
import { RunWorkspace } from '../../schemas/workspace.js'
import { RunLimits } from '../../schemas/limits.js'
import type { WebhookOutbox } from '../../webhooks/outbox.js'
import type { StoredEvent } from '../event-log.js'

/**
 * An async run (or a fleet worker's synchronous or streamed one) as every replica and every later life of the service
 * sees it, but its result: kept (and read back, and checked) on its own, since it may be as large as the output limit
 * and a listing never needs it.
 */
export const RunRecordHead = Type.Object({
  id: Type.String(),
  caller: Type.String({ description: 'The token that created it, by name: other callers neither see nor reach it.' }),
  /** Absent: async. A fleet's worker records the synchronous and streamed runs it takes as well. */
  kind: Type.Optional(Type.Union([Type.Literal('sync'), Type.Literal('stream')])),
  tool: Type.String(),
  status: RunStatus,
  createdAt: Type.String(),
  finishedAt: Type.Union([Type.String(), Type.Null()]),
  replica: Type.String({ description: 'The service process running it: only that one can stop its agent.' }),
  // Absent from what an older version stored.
  task: Type.Optional(Type.String({ description: 'The beginning of its task (task-excerpt.ts).' })),
  deadline: Type.Optional(Type.String({ description: 'When its timeout stops it.' })),
  webhook: Type.Optional(ListedWebhook),
  workspace: Type.Optional(RunWorkspace),
  /** The model it asked for, and the limits it is held to. */
  model: Type.Optional(Type.String()),
  limits: Type.Optional(RunLimits),
  /** An A2A task's context (the first task of its conversation), which a later message continues. */
  context: Type.Optional(Type.String()),
  /** While queued: its place on the replica it waits on, as of its last save. */
  queuePosition: Type.Optional(Type.Integer()),
  /** Ended before its agent started, after it was accepted: why. */
  error: Type.Optional(RunError)
})
export type RunRecord = Static<typeof RunRecordHead> & { result: RunResult | null }

const Nullable = Type.Union([Type.String(), Type.Null()])

/** A worktree as a session keeps it: enough to run git in it again, and in the repository it was made from. */
export const SessionWorktree = Type.Object({
  path: Type.String(),
  gitDir: Type.String(),
  topLevel: Type.String(),
  commonDir: Type.String(),
  base: Type.String(),
  /** Where in it the agent works (its caller's cwd, relative to the repository's top). */
  prefix: Type.String()
})
export type SessionWorktree = Static<typeof SessionWorktree>

/**
 * A session an agent's CLI reported (its conversation, which a later run may continue): whose it is and where it ran,
 * so that only its caller (the token that started it) continues it, there. Kept SESSIONS_RETENTION_MS after its last
 * run.
 */
export const SessionRecord = Type.Object({
  id: Type.String(),
  tool: Type.String(),
  caller: Type.String(),
  cwd: Nullable,
  wslDistro: Nullable,
  wslUser: Nullable,
  updatedAt: Type.String(),
  /** Where a worktree run's session continues: its worktree, which lives as long as the session. */
  worktree: Type.Optional(SessionWorktree)
})
export type SessionRecord = Static<typeof SessionRecord>

/** Who keeps sessions: each run store, beside its runs (across replicas with Redis). */
export interface SessionStore {
  /**
   * Keeps the session for its caller: false, and nothing changed, when the id is another caller's (a session is
   * created by one caller and never re-owned, whatever an agent reports). Past `sessionsMaxPerOwner` the caller's least
   * recent go.
   */
  saveSession(session: SessionRecord): Promise<boolean>
  /** undefined once unknown or past retention. */
  session(tool: string, id: string): Promise<SessionRecord | undefined>
  /**
   * Claims the session for `holder`, one run continuing it, for at most `ttlMs` (a crashed holder's claim lapses);
   * false while another holds it, on any replica sharing the store.
   */
  claimSession(tool: string, id: string, holder: string, ttlMs: number): Promise<boolean>
  releaseSession(tool: string, id: string, holder: string): Promise<void>
}

export const sessionKey = (tool: string, id: string): string => `${tool}:${id}`

/** A session is kept while its last run is recent enough. */
export const isFreshSession = (session: SessionRecord, retentionMs: number, now = Date.now()): boolean =>
  now - Date.parse(session.updatedAt) <= retentionMs

/** How far back a token's daily ceiling (TOKEN_DAILY_COST_USD) looks: its spend is rolling, not per calendar day. */
export const SPEND_WINDOW_MS = 86_400_000

/** What each token's runs cost as they ended, kept a day: what its daily ceiling is held against. */
export interface SpendLedger {
  /** Dollars the caller's runs that ended since `since` cost. */
  spentSince(caller: string, since: Date): Promise<number>
  /** A run's cost, as it ended at `at`; what is a day older than that goes. */
  record(caller: string, run: string, costUsd: number, at: Date): Promise<void>
}

/** Where async runs are kept: their record, and their kept events, also after their agent has ended. */
export interface RunStore extends SessionStore {
  /** What 'auto' chose, for the startup log and /readyz. */
  readonly kind: 'memory' | 'sqlite' | 'redis'
  /** The runs' webhook deliveries, kept with them: what keeps the runs keeps the deliveries. */
  readonly outbox: WebhookOutbox
  /** Each token's spend over the last day: fleet-wide where the runs are. */
  readonly spend: SpendLedger
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
  list(caller: string): Promise<Array<Omit<RunRecord, 'result'>>>
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
  sessionsRetentionMs: number
  sessionsMaxPerOwner: number
}

/** A finished run is kept while it is recent enough. */
export const isRetained = (record: Pick<RunRecord, 'finishedAt'>, retentionMs: number, now = Date.now()): boolean =>
  record.finishedAt === null || now - Date.parse(record.finishedAt) <= retentionMs

type Created = Pick<RunRecord, 'createdAt'>
export const byNewest = (a: Created, b: Created): number => b.createdAt.localeCompare(a.createdAt)

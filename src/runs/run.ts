import { randomUUID } from 'node:crypto'
import type { ToolName } from '../agents/catalog.js'
import { serviceError } from '../errors.js'
import type { RunResult, StopReason } from '../schemas/run.js'
import type { RunBrief } from './run-brief.js'
import { hasAgent, isEnd, nextPhase, type RunPhase } from './run-phase.js'

/** How a run was asked for: it decides who reads its output (its own response, or followers of the stored run). */
export type RunKind = 'sync' | 'stream' | 'async'

/** Told of every phase a run enters, in order, once each. */
export type PhaseWatcher = (run: Run, from: RunPhase) => void

/**
 * One run, however it was asked for, from the request that opened it to its end: the one object that knows its phase
 * (run-phase.ts) and moves it, and whom every stop path goes through. Whatever stops it (its client leaving, DELETE,
 * its deadline, shutdown) gives the reason that becomes its stop_reason; before its agent starts, a stop means nothing
 * starts: the next step refuses.
 */
export class Run {
  readonly id = randomUUID()
  readonly createdAt = new Date()
  readonly kind: RunKind
  readonly owner: string
  readonly tool: ToolName
  readonly #controller = new AbortController()
  readonly #watchers: PhaseWatcher[] = []
  #phase: RunPhase = 'opened'
  #result: RunResult | null = null
  #brief: RunBrief | null = null
  readonly #ended: () => void
  readonly #whenEnded: Promise<void>

  constructor(kind: RunKind, tool: ToolName, owner: string) {
    this.kind = kind
    this.tool = tool
    this.owner = owner
    let ended: (() => void) | undefined
    this.#whenEnded = new Promise<void>((resolve) => { ended = resolve })
    this.#ended = ended!
  }

  get phase(): RunPhase {
    return this.#phase
  }

  /** Aborted by the first stop: what the agent's process watches. */
  get signal(): AbortSignal {
    return this.#controller.signal
  }

  /** Its task's beginning and its deadline, once its agent started. */
  get brief(): RunBrief | null {
    return this.#brief
  }

  /** The agent's result, once `finished`. */
  get result(): RunResult | null {
    return this.#result
  }

  /** A synchronous or streamed run whose agent exists: the only kind listed from memory (async ones are stored). */
  get listedLive(): boolean {
    return this.kind !== 'async' && hasAgent(this.#phase)
  }

  watch(watcher: PhaseWatcher): void {
    this.#watchers.push(watcher)
  }

  /** Asks the run to stop; the first reason wins. Its agent's process reports the stop as it begins (`stopping`). */
  stop(reason: StopReason): void {
    this.#controller.abort(reason)
  }

  /**
   * The next step before the agent exists. A run stopped meanwhile goes no further: it is refused with what its
   * stopper's caller is told (503 SHUTTING_DOWN, or 499 for a client that left).
   */
  advance(to: 'placed' | 'waiting_for_slot' | 'starting'): void {
    if (this.signal.aborted) throw serviceError(stopRefusal(this.signal.reason as StopReason))
    this.#moveTo(to)
  }

  /** The agent exists (its pid is known). */
  agentStarted(brief: RunBrief | null = null): void {
    this.#brief = brief
    this.#moveTo('running')
  }

  /** Its agent's process began to stop it (a stop asked for, or its deadline). */
  stopping(): void {
    this.#moveTo('stopping')
  }

  finish(result: RunResult): void {
    this.#result = result
    this.#moveTo('finished')
  }

  /** Ended on an error: `refused` when no agent had started, `failed` after. */
  abort(): void {
    this.#moveTo(hasAgent(this.#phase) ? 'failed' : 'refused')
  }

  /** Settles once the run has reached an end, however (its result or its refusal goes to whoever launched it). */
  ended(): Promise<void> {
    return this.#whenEnded
  }

  #moveTo(to: RunPhase): void {
    const from = this.#phase
    this.#phase = nextPhase(from, to)
    for (const watcher of this.#watchers) watcher(this, from)
    if (isEnd(to)) this.#ended()
  }
}

/** What the caller of a run stopped before its agent started is told. */
export const stopRefusal = (reason: StopReason): 'SHUTTING_DOWN' | 'CLIENT_CLOSED_REQUEST' =>
  reason === 'shutdown' ? 'SHUTTING_DOWN' : 'CLIENT_CLOSED_REQUEST'

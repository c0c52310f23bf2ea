import { randomUUID } from 'node:crypto'
import { EventEmitter } from 'node:events'
import type { ToolName } from '../agents/catalog.js'
import { serviceError, ServiceError } from '../errors.js'
import type { AgentObserver } from '../process/agent-process.js'
import type { RunParams, RunResult, StopReason } from '../schemas/run.js'
import type { Step } from '../schemas/steps.js'
import { DEFAULT_WEBHOOK_EVENTS, type ListedWebhook } from '../schemas/webhooks.js'
import type { RunError } from '../schemas/runs.js'
import type { RunWorkspace } from '../schemas/workspace.js'
import type { RunLimits } from '../schemas/limits.js'
import { finishedStatus } from './result.js'
import { hasAgent, isEnd, nextPhase, type RunPhase } from './run-phase.js'
import type { RunRecord } from './stores/run-store.js'
import { taskExcerpt } from './task-excerpt.js'

/** How a run was asked for: it decides who reads its output (its own response, or followers of the stored run). */
export type RunKind = 'sync' | 'stream' | 'async'

/**
 * What a run tells whoever follows it, in order: each phase it enters (with the one it left), its agent's pid, each
 * chunk of output (and of stdout alone, where a CLI writes its structured output), each step read from it, and the
 * beginning of its stop. Listeners observe: none may slow the agent (a live reader that may is the launch's `sink`).
 */
export interface RunEvents {
  phase: [from: RunPhase]
  queued: [position: number]
  spawn: [pid: number]
  output: [chunk: Buffer]
  stdout: [chunk: Buffer]
  step: [step: Step]
  stopping: [reason: StopReason]
}

/** A run as a listing, a store and the API see it at one moment: its record, and how it was asked for. */
export type RunSnapshot = Omit<RunRecord, 'replica' | 'kind'> & { kind: RunKind }

/** An A2A task's push notifications: where, and with the credentials its receiver gave. */
export interface RunPush {
  /** The config's id, as the task's push-notification configs name it. */
  config: string
  url: string
  headers: Record<string, string>
}

export interface RunOpening {
  kind: RunKind
  tool: ToolName
  caller: string
  params: Pick<RunParams, 'task' | 'timeout' | 'webhook'>
  /** An A2A task's context, when it continues one. */
  context?: string
  push?: RunPush
  /** A run a fleet's API replica opened and handed over: its id, when it was asked for, the slot admitting it. */
  handedOver?: { id: string; createdAt: string; slot: string }
}

/**
 * One run, however it was asked for, from the request that opened it to its end: the one object that knows its phase
 * (run-phase.ts) and moves it, holds its record, tells its events, and whom every stop path goes through. Whatever
 * stops it (its client leaving, DELETE, its deadline, shutdown) gives the reason that becomes its stop_reason; before
 * its agent starts, a stop means nothing starts: the next step refuses.
 */
export class Run extends EventEmitter<RunEvents> implements AgentObserver {
  readonly id: string
  readonly createdAt: Date
  /** The slot it was admitted with elsewhere (a fleet's API replica), which it adopts rather than take one. */
  readonly admittedWith: string | undefined
  readonly kind: RunKind
  readonly caller: string
  readonly tool: ToolName
  /** The task's beginning, for listings. */
  readonly task: string
  /** How long its agent may run, from its start. */
  readonly timeoutMs: number
  /** Who is told of its start and end. */
  readonly webhook: ListedWebhook | undefined
  /** An A2A task's context, when it continues one. */
  readonly context: string | undefined
  /** An A2A task's push notifications, when its client asked for them. */
  readonly push: RunPush | undefined
  /** Made when something first watches: a run refused at once (most refusals) never needs one. */
  #controller: AbortController | undefined
  #stopReason: StopReason | undefined
  #phase: RunPhase = 'opened'
  #deadline: Date | null = null
  #finishedAt: Date | null = null
  #result: RunResult | null = null
  #workspace: RunWorkspace | undefined
  #model: string | undefined
  #limits: RunLimits | undefined
  /** Its place among the runs waiting for a slot of its tool, while it waits. */
  #queuePosition: number | null = null
  /** When it began to wait for a slot, and how long it waited once it got one. */
  #waitingSince = 0
  #waitedMs = 0
  #refusal: unknown = undefined
  readonly #ended: () => void
  readonly #whenEnded: Promise<void>

  constructor({ kind, tool, caller, params, context, push, handedOver }: RunOpening) {
    super()
    this.id = handedOver?.id ?? randomUUID()
    this.createdAt = handedOver === undefined ? new Date() : new Date(handedOver.createdAt)
    this.admittedWith = handedOver?.slot
    this.kind = kind
    this.context = context
    this.push = push
    this.tool = tool
    this.caller = caller
    this.task = taskExcerpt(params.task)
    this.timeoutMs = params.timeout * 1000
    const { webhook } = params
    this.webhook = webhook && { url: webhook.url, events: webhook.events ?? DEFAULT_WEBHOOK_EVENTS }
    let ended: (() => void) | undefined
    this.#whenEnded = new Promise<void>((resolve) => { ended = resolve })
    this.#ended = ended!
  }

  get phase(): RunPhase {
    return this.#phase
  }

  /** Aborted by the first stop: what the agent's process, and a wait for a slot, watch. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController()
      if (this.#stopReason !== undefined) this.#controller.abort(this.#stopReason)
    }
    return this.#controller.signal
  }

  /** Whether anything stopped it yet (its signal aborted, or about to be). */
  get stopped(): boolean {
    return this.#stopReason !== undefined
  }

  /** What stopped it first, undefined while nothing has. */
  get stopReason(): StopReason | undefined {
    return this.#stopReason
  }

  /** The agent's result, once `finished`. */
  get result(): RunResult | null {
    return this.#result
  }

  /** What refused it, once `refused`: the error its launch's caller is answered with. */
  get refusal(): unknown {
    return this.#refusal
  }

  /** A synchronous or streamed run whose agent exists: the only kind listed from memory (async ones are stored). */
  get listedLive(): boolean {
    return this.kind !== 'async' && hasAgent(this.#phase)
  }

  /** Its record as of now: `running` until its end, then what its end says. */
  snapshot(): RunSnapshot {
    const result = this.#result
    let status: RunSnapshot['status'] = this.#queuePosition === null ? 'running' : 'queued'
    if (result !== null) status = finishedStatus(result)
    else if (isEnd(this.#phase) && this.#phase !== 'handed_over') status = this.#endedUnrun()
    const error = this.#phase === 'refused' ? runError(this.#refusal) : undefined
    return {
      id: this.id,
      kind: this.kind,
      caller: this.caller,
      tool: this.tool,
      status,
      task: this.task,
      createdAt: this.createdAt.toISOString(),
      ...(this.#deadline === null ? {} : { deadline: this.#deadline.toISOString() }),
      finishedAt: this.#finishedAt?.toISOString() ?? null,
      ...(this.webhook === undefined ? {} : { webhook: this.webhook }),
      ...(this.#workspace === undefined ? {} : { workspace: this.#workspace }),
      ...(this.#model === undefined ? {} : { model: this.#model }),
      ...(this.#limits === undefined ? {} : { limits: this.#limits }),
      ...(this.context === undefined ? {} : { context: this.context }),
      ...(this.#queuePosition === null ? {} : { queuePosition: this.#queuePosition }),
      ...(error === undefined ? {} : { error }),
      result
    }
  }

  /** It waits for a slot, at this place (1 is next). */
  queued(position: number): void {
    this.#queuePosition = position
    this.emit('queued', position)
  }

  /** Ended before its agent: cancelled when DELETE or shutdown stopped it, failed otherwise. */
  #endedUnrun(): 'cancelled' | 'failed' {
    const reason = this.#stopReason
    return reason === 'cancelled' || reason === 'shutdown' ? 'cancelled' : 'failed'
  }

  /** The model its CLI is asked for, and the limits it is held to (before it waits for a slot). */
  holdTo(model: string | undefined, limits: RunLimits | undefined): void {
    this.#model = model
    this.#limits = limits
  }

  /** Its agent works in a worktree of its own, from now on (before it starts). */
  workIn(workspace: RunWorkspace): void {
    this.#workspace = workspace
  }

  /** Asks the run to stop; the first reason wins. Its agent's process reports the stop as it begins (`stopping`). */
  stop(reason: StopReason): void {
    this.#stopReason ??= reason
    this.#controller?.abort(reason)
  }

  /**
   * The next step before the agent exists. A run stopped meanwhile goes no further: it is refused with what its
   * stopper's caller is told (503 SHUTTING_DOWN, or 499 for a client that left).
   */
  advance(to: 'placed' | 'waiting_for_slot' | 'starting'): void {
    if (this.#stopReason !== undefined) throw serviceError(stopRefusal(this.#stopReason))
    this.#moveTo(to)
  }

  /** The agent exists (its pid is known): its timeout runs from now. */
  spawned(pid: number): void {
    this.#deadline = new Date(Date.now() + this.timeoutMs)
    this.#moveTo('running')
    this.emit('spawn', pid)
  }

  /**
   * A fleet's worker started its agent, and this replica relays what it does (a synchronous or streamed run): it runs,
   * until the deadline its worker set.
   */
  runsElsewhere(deadline: string | undefined): void {
    if (deadline !== undefined) this.#deadline = new Date(deadline)
    this.#moveTo('running')
  }

  /** How long it waited for its slot, once it has one (0 before). */
  get waitedMs(): number {
    return this.#waitedMs
  }

  /** Its agent's process began to stop it (a stop asked for, or its deadline). */
  stopping(reason: StopReason): void {
    this.#moveTo('stopping')
    this.emit('stopping', reason)
  }

  output(chunk: Buffer): void {
    this.emit('output', chunk)
  }

  stdout(chunk: Buffer): void {
    this.emit('stdout', chunk)
  }

  finish(result: RunResult): void {
    this.#result = result
    this.#end('finished')
  }

  /** A fleet's worker started its agent and records it from now on: nothing more happens to it here. */
  handOff(): void {
    this.#moveTo('handed_over')
  }

  /** Ended on an error: `refused` when no agent had started, `failed` after. */
  abort(error: unknown): void {
    if (!hasAgent(this.#phase)) this.#refusal = error
    this.#end(hasAgent(this.#phase) ? 'failed' : 'refused')
  }

  /** Settles once the run has reached an end, however (its result or its refusal goes to whoever launched it). */
  ended(): Promise<void> {
    return this.#whenEnded
  }

  #end(to: 'finished' | 'refused' | 'failed'): void {
    this.#finishedAt = new Date()
    this.#moveTo(to)
  }

  #moveTo(to: RunPhase): void {
    const from = this.#phase
    // Whatever comes after waiting for a slot, it waits no more.
    if (to !== 'waiting_for_slot') this.#queuePosition = null
    this.#phase = nextPhase(from, to)
    if (to === 'waiting_for_slot') this.#waitingSince = performance.now()
    if (to === 'starting') this.#waitedMs = performance.now() - this.#waitingSince
    this.emit('phase', from)
    if (isEnd(to)) this.#ended()
  }
}

/** What a stored run says of the refusal that ended it before its agent started: its code and message. */
function runError(refusal: unknown): RunError | undefined {
  if (!(refusal instanceof ServiceError)) return undefined
  return { code: refusal.code, message: refusal.message }
}

/** What the caller of a run stopped before its agent started is told. */
export const stopRefusal = (reason: StopReason): 'SHUTTING_DOWN' | 'CLIENT_CLOSED_REQUEST' =>
  reason === 'shutdown' ? 'SHUTTING_DOWN' : 'CLIENT_CLOSED_REQUEST'

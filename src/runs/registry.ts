import type { FastifyBaseLogger } from 'fastify'
import { randomUUID } from 'node:crypto'
import { LRUCache } from 'lru-cache'
import type { ToolName } from '../agents/definitions.js'
import { runOutcome } from '../agents/result.js'
import type { RunParams, RunResult, StopReason } from '../schemas/run.js'
import type { RunState, RunStatus, RunSummary } from '../schemas/runs.js'
import { OutputEvents } from '../streams/output-events.js'
import { RunEventLog } from './event-log.js'
import type { RunLauncher } from './launcher.js'

/** How a run was asked for: it decides who reads its output and who may stop it. */
export type RunKind = 'sync' | 'stream' | 'async'

export interface AsyncRun {
  readonly id: string
  readonly kind: 'async'
  /** The name of the token that created it: other callers neither see it nor reach it. */
  readonly owner: string
  readonly tool: ToolName
  readonly createdAt: Date
  finishedAt: Date | null
  result: RunResult | null
  failed: boolean
  readonly events: RunEventLog
  readonly controller: AbortController
  /** Settles when the agent has ended and the result is recorded. */
  done: Promise<void>
}

/**
 * A synchronous or streamed run while it runs: listed and cancellable like an async run, its output goes only to its own
 * response, and it is forgotten when that response ends.
 */
export interface LiveRun {
  readonly id: string
  readonly kind: 'sync' | 'stream'
  readonly owner: string
  readonly tool: ToolName
  readonly createdAt: Date
  /** Stops it (DELETE, shutdown) and resolves once its response has been written. */
  cancel(reason: StopReason): Promise<void>
}

export type AnyRun = AsyncRun | LiveRun

export interface RegistryOptions {
  launcher: RunLauncher
  outputLimitBytes: number
  retentionMs: number
  maxFinished: number
}

/**
 * The asynchronous runs of this replica: running ones until they end, finished ones for a bounded time and count (the
 * oldest go first). A run belongs to no HTTP connection: it outlives its caller, and only DELETE, its deadline or the
 * service's shutdown stop it.
 */
export class RunRegistry {
  readonly #options: RegistryOptions
  readonly #running = new Map<string, AsyncRun>()
  readonly #live = new Map<string, LiveRun>()
  readonly #finished: LRUCache<string, AsyncRun>

  constructor(options: RegistryOptions) {
    this.#options = options
    this.#finished = new LRUCache({ max: options.maxFinished, ttl: options.retentionMs })
  }

  /** Starts a run; resolves once the agent runs, or rejects with the same errors as the synchronous route. */
  async start(tool: ToolName, params: RunParams, log: FastifyBaseLogger, owner: string): Promise<AsyncRun> {
    const { launcher, outputLimitBytes } = this.#options
    const lease = await launcher.reserve(tool, params)
    const run: AsyncRun = {
      id: randomUUID(),
      kind: 'async',
      owner,
      tool,
      createdAt: new Date(),
      finishedAt: null,
      result: null,
      failed: false,
      events: new RunEventLog(outputLimitBytes),
      controller: new AbortController(),
      done: Promise.resolve()
    }
    const output = new OutputEvents()
    let spawned = false
    const started = new Promise<void>((resolve, reject) => {
      run.done = launcher
        .run(tool, params, lease, {
          runId: run.id,
          signal: run.controller.signal,
          log: log.child({ run: run.id }),
          onSpawn: () => {
            spawned = true
            this.#running.set(run.id, run)
            resolve()
          },
          // No reader can slow the agent down here: the log keeps what it may, bounded.
          onOutput: (chunk) => run.events.appendOutput(output.next(chunk), chunk.length)
        })
        .then(
          (result) => {
            const unfinished = output.end()
            if (unfinished !== null) run.events.appendOutput(unfinished, 0)
            this.#finish(run, result)
          },
          (error: unknown) => {
            if (!spawned) return reject(error)
            log.error({ err: error, run: run.id }, 'async run failed after its agent started')
            run.failed = true
            this.#finish(run, null)
          }
        )
    })
    await started
    return run
  }

  /** A run of this caller's; undefined for an unknown run and for another caller's alike. */
  get(id: string, owner: string): AnyRun | undefined {
    const run = this.#running.get(id) ?? this.#finished.get(id) ?? this.#live.get(id)
    return run?.owner === owner ? run : undefined
  }

  /** This caller's runs, newest first: async ones, and synchronous or streamed ones while they run. */
  list(owner: string): AnyRun[] {
    return [...this.#running.values(), ...this.#finished.values(), ...this.#live.values()]
      .filter((run) => run.owner === owner)
      .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime())
  }

  /** Lists a synchronous or streamed run while it runs; the returned function forgets it. */
  track(run: LiveRun): () => void {
    this.#live.set(run.id, run)
    return () => this.#live.delete(run.id)
  }

  /** Stops a run (its whole process tree) and resolves once it has ended. */
  async cancel(run: AnyRun, reason: StopReason = 'cancelled'): Promise<void> {
    if (run.kind !== 'async') return run.cancel(reason)
    run.controller.abort(reason)
    await run.done
  }

  async stopAll(reason: StopReason): Promise<void> {
    await Promise.all([...this.#running.values()].map((run) => this.cancel(run, reason)))
  }

  #finish(run: AsyncRun, result: RunResult | null): void {
    run.result = result
    run.finishedAt = new Date()
    this.#running.delete(run.id)
    this.#finished.set(run.id, run)
    run.events.end(result)
  }
}

export function statusOf(run: AnyRun): RunStatus {
  if (run.kind !== 'async') return 'running'
  if (run.result === null) return run.failed ? 'failed' : 'running'
  // Stopped by DELETE or by shutdown, a run was cancelled; a caller that vanished cannot stop an async run.
  return runOutcome(run.result)
}

export function summaryOf(run: AnyRun): RunSummary {
  return {
    id: run.id,
    tool: run.tool,
    kind: run.kind,
    status: statusOf(run),
    created_at: run.createdAt.toISOString(),
    finished_at: run.kind === 'async' ? run.finishedAt?.toISOString() ?? null : null
  }
}

export function stateOf(run: AnyRun): RunState {
  return { ...summaryOf(run), result: run.kind === 'async' ? run.result : null }
}

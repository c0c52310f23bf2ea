import type { FastifyBaseLogger } from 'fastify'
import { randomUUID } from 'node:crypto'
import type { ToolName } from '../agents/tools.js'
import type { RunHooks } from '../process/agent-process.js'
import type { RunParams, RunResult, StopReason } from '../schemas/run.js'
import type { RunLauncher } from './launcher.js'

/** How a run was asked for: it decides who reads its output (its own response, or followers of the stored run). */
export type RunKind = 'sync' | 'stream' | 'async'

/**
 * One run, however it was asked for: from the request that created it until its agent has ended. It can be stopped
 * from anywhere (its client leaving, DELETE, its deadline, shutdown); the reason it was stopped becomes its
 * stop_reason. Before its agent starts, stopping it means nothing starts.
 */
export class Run {
  readonly id = randomUUID()
  readonly createdAt = new Date()
  readonly kind: RunKind
  readonly owner: string
  readonly tool: ToolName
  readonly #controller = new AbortController()
  #spawned = false
  #settled: Promise<unknown> = Promise.resolve()

  constructor(kind: RunKind, tool: ToolName, owner: string) {
    this.kind = kind
    this.tool = tool
    this.owner = owner
  }

  /** Its agent has started (it is listed from then on). */
  get spawned(): boolean {
    return this.#spawned
  }

  stop(reason: StopReason): void {
    this.#controller.abort(reason)
  }

  /** Settles once the run has ended, however it did (its result or its refusal goes to whoever executed it). */
  async ended(): Promise<void> {
    await this.#settled.catch(() => undefined)
  }

  /** Reserves, runs, releases: once per run. Rejects with the refusals (400, 429, 503) as the routes answer them. */
  execute(launcher: RunLauncher, params: RunParams, log: FastifyBaseLogger, hooks: RunHooks = {}): Promise<RunResult> {
    const execution = launcher.execute(this.tool, params, {
      runId: this.id,
      signal: this.#controller.signal,
      log,
      hooks: {
        ...hooks,
        onSpawn: (pid) => {
          this.#spawned = true
          hooks.onSpawn?.(pid)
        }
      }
    })
    this.#settled = execution
    return execution
  }
}

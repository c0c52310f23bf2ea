import type { FastifyBaseLogger } from 'fastify'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ToolName } from '../agents/catalog.js'
import type { RunParams, RunResult } from '../schemas/run.js'
import type { RunState, RunSummary } from '../schemas/runs.js'
import { follow, logSource, storeSource, type Feed } from './follow.js'
import type { RunLauncher } from './launcher.js'
import { Run, type RunKind } from './run.js'
import { isEnd, type RunPhase } from './run-phase.js'
import { RunRecorder } from './run-recorder.js'
import type { RunRecord, RunStore } from './stores/run-store.js'

/** Who hears what the runs do (the service's metrics): told, never asked, so runs/ imports none of it. */
interface RunsObserver {
  /** How to count the open runs by phase, whenever the observer wants to. */
  countRunsBy(phases: () => RunPhase[]): void
  /** A run finished with this result. */
  observeRun(result: RunResult): void
}

export interface RegistryOptions {
  launcher: RunLauncher
  metrics: RunsObserver
  /** This process, among the replicas sharing a store. */
  replica: string
  store: RunStore
  outputLimitBytes: number
  /** How often a running run's new events are saved to the store (what a crash can lose, what other replicas lag). */
  saveEveryMs: number
  /** How long DELETE waits for another replica to stop its run. */
  remoteStopWaitMs: number
}

/**
 * Every run of this replica, from the request that opened it to its end, whatever its kind; async runs also in the
 * store (finished ones only there), so that any replica and any later life can answer for them. An async run belongs
 * to no HTTP connection: it outlives its caller, and only DELETE, its deadline or shutdown stop it.
 */
export class RunRegistry {
  readonly #options: RegistryOptions
  readonly #open = new Map<string, Run>()
  readonly #recorded = new Map<string, RunRecorder>()
  #shuttingDown = false

  constructor(options: RegistryOptions) {
    this.#options = options
    options.store.onCancelRequest((id) => this.#recorded.get(id)?.run.stop('cancelled'))
    options.metrics.countRunsBy(() => [...this.#open.values()].map((run) => run.phase))
  }

  /** A new run, stoppable (by shutdown, by its caller) from now on; listed once its agent runs, gone at its end. */
  open(kind: RunKind, tool: ToolName, owner: string, log: FastifyBaseLogger): Run {
    const run = new Run(kind, tool, owner)
    this.#open.set(run.id, run)
    run.watch((moved, from) => {
      log.debug({ run: moved.id, tool: moved.tool, kind: moved.kind, from, phase: moved.phase }, 'run phase')
      if (moved.phase === 'finished') this.#options.metrics.observeRun(moved.result!)
      if (isEnd(moved.phase)) this.#open.delete(moved.id)
    })
    // A request that got past routing as shutdown began: its run ends before any agent starts.
    if (this.#shuttingDown) run.stop('shutdown')
    return run
  }

  /**
   * Starts an async run; resolves once the agent runs and the run is stored, or rejects as the synchronous route
   * would.
   */
  async start(tool: ToolName, params: RunParams, log: FastifyBaseLogger, owner: string): Promise<RunState> {
    const { launcher, store, replica, outputLimitBytes, saveEveryMs } = this.#options
    const run = this.open('async', tool, owner, log)
    const runLog = log.child({ run: run.id })
    const recorder = new RunRecorder(run, { store, replica, outputLimitBytes, saveEveryMs, log: runLog })
    this.#recorded.set(run.id, recorder)
    void recorder.done.then(() => this.#recorded.delete(run.id))
    launcher.launch(run, params, runLog, recorder.hooks).catch((error: unknown) => {
      if (run.phase === 'refused') recorder.refused(error)
      else runLog.error({ err: error }, 'async run failed after its agent started')
    })
    await recorder.stored
    return stateOf(recorder.record)
  }

  /** A run of this caller's; undefined for an unknown run and for another caller's alike. */
  async state(id: string, owner: string): Promise<RunState | undefined> {
    const live = this.#liveRun(id)
    if (live !== undefined) return live.owner === owner ? liveState(live) : undefined
    const record = this.#recorderOf(id)?.record ?? (await this.#options.store.get(id))
    return record?.owner === owner ? stateOf(record) : undefined
  }

  /** This caller's runs, newest first: async ones, and synchronous or streamed ones while they run. */
  async list(owner: string): Promise<RunSummary[]> {
    const stored = (await this.#options.store.list(owner)).map((listing) => stateOf({ ...listing, result: null }))
    const live = [...this.#open.values()].filter((run) => run.owner === owner && run.listedLive).map(liveState)
    return [...live, ...stored]
      .sort((a, b) => b.created_at.localeCompare(a.created_at))
      .map(({ result: _result, ...summary }) => summary)
  }

  /** The events of an async run of this caller's, for a follower; undefined when there is none to follow. */
  async feed(id: string, owner: string): Promise<Feed | undefined> {
    const recorder = this.#recorderOf(id)
    const { store, saveEveryMs } = this.#options
    const record = recorder?.record ?? (await store.get(id))
    if (record?.owner !== owner) return undefined
    const source = recorder === undefined ? storeSource(store, record, saveEveryMs) : logSource(recorder.events)
    return (lastId, choice, signal) => follow(source, lastId, choice, signal)
  }

  /** Stops a run of this caller's (its whole process tree, wherever it runs) and answers with its final state. */
  async cancel(id: string, owner: string): Promise<RunState | undefined> {
    const live = this.#liveRun(id)
    if (live !== undefined) {
      if (live.owner !== owner) return undefined
      live.stop('cancelled')
      await live.ended()
      // Its result went to its own caller; here, only that it was cancelled.
      return { ...liveState(live), status: 'cancelled', finished_at: new Date().toISOString() }
    }
    const recorder = this.#recorderOf(id)
    if (recorder !== undefined) {
      if (recorder.record.owner !== owner) return undefined
      recorder.run.stop('cancelled')
      await recorder.done
      return stateOf(recorder.record)
    }
    const record = await this.#options.store.get(id)
    if (record?.owner !== owner) return undefined
    if (record.status !== 'running') return stateOf(record)
    return stateOf(await this.#stopElsewhere(record))
  }

  /** Stops every run and any opened later, and resolves once each has ended and every async one is stored. */
  async shutdown(): Promise<void> {
    this.#shuttingDown = true
    const stopping = [...this.#open.values()].map((run) => {
      run.stop('shutdown')
      return run.ended()
    })
    await Promise.all([...stopping, ...[...this.#recorded.values()].map((recorder) => recorder.done)])
  }

  /** A synchronous or streamed run whose agent runs: the only kind listed from memory. */
  #liveRun(id: string): Run | undefined {
    const run = this.#open.get(id)
    return run?.listedLive === true ? run : undefined
  }

  /** An async run of this replica's whose agent started (before, nobody was given its id). */
  #recorderOf(id: string): RunRecorder | undefined {
    const recorder = this.#recorded.get(id)
    return recorder?.storing === true ? recorder : undefined
  }

  /**
   * Asks the replica running it to stop it, and waits (bounded) for that replica to record its end. The request is
   * repeated while the run is seen running: a message sent while that replica was reconnecting is not lost for good.
   */
  async #stopElsewhere(record: RunRecord): Promise<RunRecord> {
    const deadline = Date.now() + this.#options.remoteStopWaitMs
    let current = record
    while (current.status === 'running' && Date.now() < deadline) {
      await this.#options.store.requestCancel(current)
      await sleep(this.#options.saveEveryMs)
      current = (await this.#options.store.get(record.id)) ?? current
    }
    return current
  }
}

function stateOf(record: RunRecord): RunState {
  return {
    id: record.id,
    tool: record.tool,
    kind: 'async',
    status: record.status,
    caller: record.owner,
    task: record.task ?? null,
    created_at: record.createdAt,
    deadline: record.deadline ?? null,
    finished_at: record.finishedAt,
    result: record.result
  }
}

function liveState(run: Run): RunState {
  return {
    id: run.id,
    tool: run.tool,
    kind: run.kind,
    status: 'running',
    caller: run.owner,
    task: run.brief?.task ?? null,
    created_at: run.createdAt.toISOString(),
    deadline: run.brief?.deadline ?? null,
    finished_at: null,
    result: null
  }
}

import type { FastifyBaseLogger } from 'fastify'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ToolName } from '../agents/tools.js'
import { runOutcome } from './result.js'
import type { RunHooks } from '../process/agent-process.js'
import type { RunParams, RunResult } from '../schemas/run.js'
import type { RunState, RunSummary } from '../schemas/runs.js'
import { OutputEvents } from './output-events.js'
import { RunEventLog } from './event-log.js'
import { follow, logSource, storeSource, type Feed } from './follow.js'
import type { RunLauncher } from './launcher.js'
import { Run, type RunKind } from './run.js'
import type { RunRecord, RunStore } from './stores/run-store.js'

/** An async run of this replica while its agent runs: what only this process holds besides the Run itself. */
interface LocalRun {
  readonly run: Run
  record: RunRecord
  readonly log: RunEventLog
  /** Settles once the agent has ended and the run is stored as finished. */
  done: Promise<void>
  savedUpTo: number
  saving: Promise<void>
}

export interface RegistryOptions {
  launcher: RunLauncher
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
 * Every run of this replica, from the request that opened it until its agent has ended, whatever its kind; async runs
 * also in the store (finished ones only there), so that any replica and any later life can answer for them. An async
 * run belongs to no HTTP connection: it outlives its caller, and only DELETE, its deadline or shutdown stop it.
 */
export class RunRegistry {
  readonly #options: RegistryOptions
  readonly #active = new Map<string, Run>()
  readonly #local = new Map<string, LocalRun>()
  #shuttingDown = false

  constructor(options: RegistryOptions) {
    this.#options = options
    options.store.onCancelRequest((id) => this.#local.get(id)?.run.stop('cancelled'))
  }

  /** A new run, stoppable (by shutdown, by its caller) from now on; listed once its agent runs. */
  open(kind: RunKind, tool: ToolName, owner: string): Run {
    const run = new Run(kind, tool, owner)
    this.#active.set(run.id, run)
    // A request that got past routing as shutdown began: its run ends before any agent starts.
    if (this.#shuttingDown) run.stop('shutdown')
    return run
  }

  /** Runs an opened run to its end (or refusal), then forgets it. */
  async execute(run: Run, params: RunParams, log: FastifyBaseLogger, hooks?: RunHooks): Promise<RunResult> {
    try {
      return await run.execute(this.#options.launcher, params, log, hooks)
    } finally {
      this.#active.delete(run.id)
    }
  }

  /**
   * Starts an async run; resolves once the agent runs and the run is stored, or rejects as the synchronous route
   * would.
   */
  async start(tool: ToolName, params: RunParams, log: FastifyBaseLogger, owner: string): Promise<RunState> {
    const { outputLimitBytes, store } = this.#options
    const run = this.open('async', tool, owner)
    const record: RunRecord = {
      id: run.id,
      owner,
      tool,
      status: 'running',
      createdAt: run.createdAt.toISOString(),
      finishedAt: null,
      result: null,
      replica: this.#options.replica
    }
    const local: LocalRun = {
      run,
      record,
      log: new RunEventLog(outputLimitBytes),
      done: Promise.resolve(),
      savedUpTo: 0,
      saving: Promise.resolve()
    }
    const runLog = log.child({ run: record.id })
    const output = new OutputEvents()
    let saver: NodeJS.Timeout | undefined
    const started = new Promise<void>((resolve, reject) => {
      local.done = this.execute(run, params, runLog, {
        onSpawn: () => {
          this.#local.set(record.id, local)
          local.saving = store.create(record)
          saver = setInterval(() => void this.#save(local, runLog), this.#options.saveEveryMs)
          // Answered once stored, so that any replica can already find it.
          resolve(
            local.saving.catch((error: unknown) => {
              run.stop('cancelled')
              throw error
            })
          )
        },
        // No reader can slow the agent down here: the log keeps what it may, bounded.
        onOutput: (chunk) => {
          const event = output.next(chunk)
          if (event !== null) local.log.appendOutput(event)
        }
      })
        .then(
          (result) => this.#end(local, output, result),
          (error: unknown) => {
            if (!run.spawned) return reject(error)
            runLog.error({ err: error }, 'async run failed after its agent started')
            return this.#end(local, output, null)
          }
        )
        .finally(() => clearInterval(saver))
        .then(() => this.#storeFinished(local, runLog))
    })
    await started
    return stateOf(record)
  }

  /** A run of this caller's; undefined for an unknown run and for another caller's alike. */
  async state(id: string, owner: string): Promise<RunState | undefined> {
    const live = this.#liveRun(id)
    if (live !== undefined) return live.owner === owner ? liveState(live) : undefined
    const record = this.#local.get(id)?.record ?? (await this.#options.store.get(id))
    return record?.owner === owner ? stateOf(record) : undefined
  }

  /** This caller's runs, newest first: async ones, and synchronous or streamed ones while they run. */
  async list(owner: string): Promise<RunSummary[]> {
    const stored = (await this.#options.store.list(owner)).map((listing) => stateOf({ ...listing, result: null }))
    const live = [...this.#active.values()].filter((run) => run.owner === owner && isLive(run)).map(liveState)
    return [...live, ...stored]
      .sort((a, b) => b.created_at.localeCompare(a.created_at))
      .map(({ result: _result, ...summary }) => summary)
  }

  /** The events of an async run of this caller's, for a follower; undefined when there is none to follow. */
  async feed(id: string, owner: string): Promise<Feed | undefined> {
    const local = this.#local.get(id)
    if (local !== undefined) {
      return local.record.owner === owner ? (lastId, signal) => follow(logSource(local.log), lastId, signal) : undefined
    }
    const record = await this.#options.store.get(id)
    if (record?.owner !== owner) return undefined
    const { store, saveEveryMs } = this.#options
    return (lastId, signal) => follow(storeSource(store, record, saveEveryMs), lastId, signal)
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
    const local = this.#local.get(id)
    if (local !== undefined) {
      if (local.record.owner !== owner) return undefined
      local.run.stop('cancelled')
      await local.done
      return stateOf(local.record)
    }
    const record = await this.#options.store.get(id)
    if (record?.owner !== owner) return undefined
    if (record.status !== 'running') return stateOf(record)
    return stateOf(await this.#stopElsewhere(record))
  }

  /** Stops every run and any opened later, and resolves once each has ended and every async one is stored. */
  async shutdown(): Promise<void> {
    this.#shuttingDown = true
    const stopping = [...this.#active.values()].map((run) => {
      run.stop('shutdown')
      return run.ended()
    })
    await Promise.all([...stopping, ...[...this.#local.values()].map((local) => local.done)])
  }

  /** A synchronous or streamed run whose agent runs: the only kind listed from memory. */
  #liveRun(id: string): Run | undefined {
    const run = this.#active.get(id)
    return run !== undefined && isLive(run) ? run : undefined
  }

  #end(run: LocalRun, output: OutputEvents, result: RunResult | null): void {
    const unfinished = output.end()
    if (unfinished !== null) run.log.appendOutput(unfinished)
    run.log.end(result, output.totalBytes)
    // Stopped by DELETE or by shutdown, a run was cancelled; a caller that vanished cannot stop an async run.
    run.record = {
      ...run.record,
      status: result === null ? 'failed' : runOutcome(result),
      finishedAt: new Date().toISOString(),
      result
    }
  }

  /** Saves what the log kept since the last save; saves run one after another, never two at once. */
  #save(run: LocalRun, log: FastifyBaseLogger): Promise<void> {
    run.saving = run.saving
      .then(async () => {
        const events = run.log.after(run.savedUpTo)
        if (events.length === 0) return
        run.savedUpTo = events.at(-1)!.id
        await this.#options.store.saveEvents(run.record.id, events, run.log.dropped())
      })
      .catch((error: unknown) => log.error({ err: error }, 'could not save the run’s events'))
    return run.saving
  }

  async #storeFinished(run: LocalRun, log: FastifyBaseLogger): Promise<void> {
    await this.#save(run, log)
    try {
      await this.#options.store.finish(run.record)
    } catch (error) {
      log.error({ err: error }, 'could not store the run’s end')
    } finally {
      this.#local.delete(run.record.id)
    }
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
    created_at: record.createdAt,
    finished_at: record.finishedAt,
    result: record.result
  }
}

const isLive = (run: Run): boolean => run.kind !== 'async' && run.spawned

function liveState(run: Run): RunState {
  return {
    id: run.id,
    tool: run.tool,
    kind: run.kind,
    status: 'running',
    created_at: run.createdAt.toISOString(),
    finished_at: null,
    result: null
  }
}

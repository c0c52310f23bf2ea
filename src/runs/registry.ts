import type { FastifyBaseLogger } from 'fastify'
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ToolName } from '../agents/definitions.js'
import { runOutcome } from '../agents/result.js'
import type { RunParams, RunResult, StopReason } from '../schemas/run.js'
import type { RunState, RunSummary } from '../schemas/runs.js'
import { OutputEvents } from '../streams/output-events.js'
import { RunEventLog, withGaps, type StoredEvent } from './event-log.js'
import type { RunLauncher } from './launcher.js'
import type { RunRecord, RunStore } from './stores/run-store.js'

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

/** An async run of this replica while its agent runs: what only this process holds. */
interface LocalRun {
  record: RunRecord
  readonly log: RunEventLog
  readonly controller: AbortController
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
  log: FastifyBaseLogger
}

/** Events read from the store per page, so that a follower of a large run never holds it whole. */
const STORED_PAGE = 64

/** A frame stream for one follower: batches of SSE frames, pulled only as fast as the follower takes them. */
export type Feed = (lastId: number, signal: AbortSignal) => AsyncGenerator<Buffer[]>

/**
 * Every run: async runs (started by POST /runs, kept in the store, running ones also here), and synchronous or streamed
 * ones while they run. An async run belongs to no HTTP connection: it outlives its caller, and only DELETE, its
 * deadline or the service's shutdown stop it.
 */
export class RunRegistry {
  readonly #options: RegistryOptions
  readonly #running = new Map<string, LocalRun>()
  readonly #live = new Map<string, LiveRun>()

  constructor(options: RegistryOptions) {
    this.#options = options
    options.store.onCancelRequest((id) => this.#running.get(id)?.controller.abort('cancelled' satisfies StopReason))
  }

  /** Starts a run; resolves once the agent runs and the run is stored, or rejects as the synchronous route would. */
  async start(tool: ToolName, params: RunParams, log: FastifyBaseLogger, owner: string): Promise<RunState> {
    const { launcher, outputLimitBytes, store } = this.#options
    const lease = await launcher.reserve(tool, params)
    const record: RunRecord = {
      id: randomUUID(),
      owner,
      tool,
      status: 'running',
      createdAt: new Date().toISOString(),
      finishedAt: null,
      result: null,
      replica: this.#options.replica
    }
    const run: LocalRun = {
      record,
      log: new RunEventLog(outputLimitBytes),
      controller: new AbortController(),
      done: Promise.resolve(),
      savedUpTo: 0,
      saving: Promise.resolve()
    }
    const runLog = log.child({ run: record.id })
    const output = new OutputEvents()
    let saver: NodeJS.Timeout | undefined
    let spawned = false
    const started = new Promise<void>((resolve, reject) => {
      run.done = launcher
        .run(tool, params, lease, {
          runId: record.id,
          signal: run.controller.signal,
          log: runLog,
          onSpawn: () => {
            spawned = true
            this.#running.set(record.id, run)
            run.saving = store.create(record)
            saver = setInterval(() => this.#save(run, runLog), this.#options.saveEveryMs)
            // Answered once stored, so that any replica can already find it.
            resolve(run.saving.catch((error: unknown) => {
              run.controller.abort('cancelled' satisfies StopReason)
              throw error
            }))
          },
          // No reader can slow the agent down here: the log keeps what it may, bounded.
          onOutput: (chunk) => {
            const event = output.next(chunk)
            if (event !== null) run.log.appendOutput(event)
          }
        })
        .then(
          (result) => this.#end(run, output, result),
          (error: unknown) => {
            if (!spawned) return reject(error)
            runLog.error({ err: error }, 'async run failed after its agent started')
            return this.#end(run, output, null)
          }
        )
        .finally(() => clearInterval(saver))
        .then(() => this.#storeFinished(run, runLog))
    })
    await started
    return stateOf(record)
  }

  /** A run of this caller's; undefined for an unknown run and for another caller's alike. */
  async state(id: string, owner: string): Promise<RunState | undefined> {
    const live = this.#live.get(id)
    if (live !== undefined) return live.owner === owner ? liveState(live) : undefined
    const record = this.#running.get(id)?.record ?? (await this.#options.store.get(id))
    return record?.owner === owner ? stateOf(record) : undefined
  }

  /** This caller's runs, newest first: async ones, and synchronous or streamed ones while they run. */
  async list(owner: string): Promise<RunSummary[]> {
    const stored = (await this.#options.store.list(owner)).map(stateOf)
    const live = [...this.#live.values()].filter((run) => run.owner === owner).map(liveState)
    return [...live, ...stored]
      .sort((a, b) => b.created_at.localeCompare(a.created_at))
      .map(({ result: _result, ...summary }) => summary)
  }

  /** Lists a synchronous or streamed run while it runs; the returned function forgets it. */
  track(run: LiveRun): () => void {
    this.#live.set(run.id, run)
    return () => this.#live.delete(run.id)
  }

  /** The events of an async run of this caller's, for a follower; undefined when there is none to follow. */
  async feed(id: string, owner: string): Promise<Feed | undefined> {
    const local = this.#running.get(id)
    if (local !== undefined) return local.record.owner === owner ? (lastId, signal) => follow(logSource(local.log), lastId, signal) : undefined
    const record = await this.#options.store.get(id)
    if (record?.owner !== owner) return undefined
    const { store, saveEveryMs } = this.#options
    return (lastId, signal) => follow(storeSource(store, record, saveEveryMs), lastId, signal)
  }

  /** Stops a run of this caller's (its whole process tree, wherever it runs) and answers with its final state. */
  async cancel(id: string, owner: string): Promise<RunState | undefined> {
    const live = this.#live.get(id)
    if (live !== undefined) {
      if (live.owner !== owner) return undefined
      await live.cancel('cancelled')
      // Its result went to its own caller; here, only that it was cancelled.
      return { ...liveState(live), status: 'cancelled', finished_at: new Date().toISOString() }
    }
    const local = this.#running.get(id)
    if (local !== undefined) {
      if (local.record.owner !== owner) return undefined
      local.controller.abort('cancelled' satisfies StopReason)
      await local.done
      return stateOf(local.record)
    }
    const record = await this.#options.store.get(id)
    if (record?.owner !== owner) return undefined
    if (record.status !== 'running') return stateOf(record)
    return stateOf(await this.#stopElsewhere(record))
  }

  async stopAll(reason: StopReason): Promise<void> {
    await Promise.all(
      [...this.#running.values()].map((run) => {
        run.controller.abort(reason)
        return run.done
      })
    )
  }

  #end(run: LocalRun, output: OutputEvents, result: RunResult | null): void {
    const unfinished = output.end()
    if (unfinished !== null) run.log.appendOutput(unfinished)
    run.log.end(result, output.totalBytes)
    // Stopped by DELETE or by shutdown, a run was cancelled; a caller that vanished cannot stop an async run.
    run.record = { ...run.record, status: result === null ? 'failed' : runOutcome(result), finishedAt: new Date().toISOString(), result }
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
      this.#running.delete(run.record.id)
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

/** Where a follower's events come from: what is there after an id, and a wait for more (true: no more will come). */
interface EventSource {
  read(lastId: number): StoredEvent[] | Promise<StoredEvent[]>
  settle(signal: AbortSignal): Promise<boolean>
}

/** A follower's frames: each read's events, with a gap wherever kept events skip output it never received. */
async function* follow(source: EventSource, lastId: number, signal: AbortSignal): AsyncGenerator<Buffer[]> {
  let position = lastId
  while (!signal.aborted) {
    const events = await source.read(lastId)
    if (events.length > 0) {
      const batch = withGaps(events, position)
      position = batch.position
      lastId = events.at(-1)!.id
      yield batch.frames
    } else if (await source.settle(signal)) return
  }
}

/** A run of this replica, in its live log: each new event as it comes. */
function logSource(log: RunEventLog): EventSource {
  return {
    read: (lastId) => log.after(lastId),
    settle: async (signal) => log.ended || (await nextEvent(log, signal), false)
  }
}

/** A run in the store: a finished one page by page, one running elsewhere (fleet) as its replica saves it. */
function storeSource(store: RunStore, record: RunRecord, pollMs: number): EventSource {
  let ended = record.status !== 'running'
  return {
    read: (lastId) => store.events(record.id, lastId, STORED_PAGE),
    settle: async (signal) => {
      if (ended) return true
      // Once the end is seen, one more read: what was saved just before it.
      ended = (await store.get(record.id))?.status !== 'running'
      if (!ended) await sleep(pollMs, undefined, { signal }).catch(() => undefined)
      return false
    }
  }
}

function nextEvent(log: RunEventLog, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      unsubscribe()
      signal.removeEventListener('abort', done)
      resolve()
    }
    const unsubscribe = log.subscribe(done)
    signal.addEventListener('abort', done, { once: true })
  })
}

export function stateOf(record: RunRecord): RunState {
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

function liveState(run: LiveRun): RunState {
  return { id: run.id, tool: run.tool, kind: run.kind, status: 'running', created_at: run.createdAt.toISOString(), finished_at: null, result: null }
}

import type { FastifyBaseLogger } from 'fastify'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ToolName } from '../agents/catalog.js'
import type { OutputSink } from '../process/agent-process.js'
import type { RunParams, RunResult } from '../schemas/run.js'
import type { RunState, RunSummary } from '../schemas/runs.js'
import type { WebhookDeliveryState } from '../schemas/webhooks.js'
import { follow, logSource, storeSource, type EventSource, type Feed } from './follow.js'
import type { RunLauncher } from './launcher.js'
import type { RunWorktrees } from './run-worktree.js'
import { launchElsewhere, type HandOverDeps, type RunFleet } from './hand-over.js'
import { relayed } from './relay.js'
import { Run, type RunKind, type RunOpening, type RunPush } from './run.js'
import { isEnd, type RunPhase } from './run-phase.js'
import { RunRecorder } from './run-recorder.js'
import { stateOf } from './run-state.js'
import { deliverRunWebhooks, fireEnds, pushDeliveries, type PushBody } from './run-webhooks.js'
import { deliveryState } from './delivery-state.js'
import type { RunRecord, RunStore } from './stores/run-store.js'
import type { PushForm, WebhookDelivery } from '../webhooks/outbox.js'
import { serviceError } from '../errors.js'

/** A run's status once it has ended, however. */
const isEndStatus = (status: RunState['status']): boolean => status !== 'queued' && status !== 'running'

/** Push configs one run takes at most: each is two deliveries, and each delivery a socket for up to its bound. */
const PUSH_CONFIGS_PER_RUN = 10

/**
 * A stored run as the API shows it: a synchronous or streamed one (a fleet's worker records those too) only while it
 * runs, as a replica running it itself shows it; its end was its caller's answer.
 */
function shown<Found extends Pick<RunRecord, 'kind' | 'status'>>(found: Found | undefined): Found | undefined {
  return found?.kind === undefined || !isEndStatus(found.status) ? found : undefined
}

/** Who hears what the runs do (the service's metrics): told, never asked, so runs/ imports none of it. */
interface RunsObserver {
  /** How to count the open runs by phase, whenever the observer wants to. */
  countRunsBy(phases: () => RunPhase[]): void
  /** A run finished with this result. */
  observeRun(result: RunResult, caller: string): void
  /** A run got its slot after waiting this long. */
  observeQueueWait(tool: string, seconds: number): void
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
  /** Told when a run's webhook event is in the store's outbox, due now. */
  webhookDue: () => void
  /** Where worktree runs' whole diffs are kept. */
  diffs: Pick<RunWorktrees, 'diff'>
  /** An A2A push's bodies (runs/ knows no protocol). */
  pushBody: PushBody
  /**
   * ROLE=api: runs are admitted here and handed to the fleet's workers, which run and record them (a synchronous or
   * streamed one is relayed back from the store); how long an admitted run waits for a worker to take it.
   */
  fleet?: RegistryFleet
}

interface RegistryFleet {
  queues: RunFleet
  takeWithinMs: number
}

/** Everything a run is asked for with, by every route: the one door into runs/. */
export interface LaunchRequest {
  kind: RunKind
  tool: ToolName
  params: RunParams
  caller: string
  log: FastifyBaseLogger
  /** A live reader that may fall behind (a stream's client): while it does, the agent waits. */
  sink?: OutputSink
  /** An A2A task's context, which it continues (its `params.resume` is that context's session). */
  context?: string
  /** An A2A task's push notifications. */
  push?: RunPush
  /** A worker's: the run an API replica admitted and handed over, which this one runs. */
  handedOver?: RunOpening['handedOver']
}

/**
 * A run launched: listeners attached to `run` as this is returned see every one of its events (the launch begins on
 * the next microtask). `result` settles at its end, with its result or its refusal; `accepted` (for a recorded run:
 * an async one, or a worker's) once its agent runs and it is stored, with its state, or with the refusal.
 */
export interface Launched {
  run: Run
  result: Promise<RunResult>
  accepted: () => Promise<RunState>
  /** Once it has ended and, for a recorded run, its end is in the store (what a replica following it reads). */
  settled: () => Promise<void>
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
  /** Runs' webhook ends not yet in the outbox: shutdown waits for them, so that no end is lost with the process. */
  readonly #webhooksPending = new Set<Promise<void>>()
  #shuttingDown = false

  constructor(options: RegistryOptions) {
    this.#options = options
    options.store.onCancelRequest((id) => this.#recorded.get(id)?.run.stop('cancelled'))
    options.metrics.countRunsBy(() => [...this.#open.values()].map((run) => run.phase))
  }

  /**
   * A new run, stoppable (by shutdown, by its caller) from now on, launched; listed once its agent runs, gone at its
   * end. An async run is recorded as its phases come.
   */
  launch({ kind, tool, params, caller, log, sink, context, push, handedOver }: LaunchRequest): Launched {
    const run = new Run({ kind, tool, caller, params, context, push, handedOver })
    this.#open.set(run.id, run)
    run.on('phase', (from) => {
      log.debug({ run: run.id, tool, kind, from, phase: run.phase }, 'run phase')
      if (run.phase === 'starting') this.#options.metrics.observeQueueWait(tool, run.waitedMs / 1000)
      if (run.phase === 'finished') this.#options.metrics.observeRun(run.result!, run.caller)
      if (isEnd(run.phase)) this.#open.delete(run.id)
    })
    // A request that got past routing as shutdown began: its run ends before any agent starts.
    if (this.#shuttingDown) run.stop('shutdown')
    const runLog = kind === 'async' ? log.child({ run: run.id }) : log
    // A worker records every run it takes: the replica its caller is connected to follows it in the store.
    const recorder = kind === 'async' || handedOver !== undefined ? this.#record(run, runLog) : undefined
    const { fleet } = this.#options
    const handsOver = fleet !== undefined && handedOver === undefined
    // An async run may be given a push config while it runs (A2A): its end fires whatever is armed by then. A relayed
    // run's webhook is its worker's to deliver.
    const delivers = run.webhook !== undefined || run.push !== undefined || kind === 'async'
    if (delivers && (kind === 'async' || !handsOver)) this.#deliverWebhooks(run, runLog)
    const result = Promise.resolve().then(() => {
      if (!handsOver) return this.#options.launcher.launch(run, params, runLog, sink)
      return recorder === undefined
        ? this.#launchRelayed(run, params, sink, fleet)
        : this.#launchElsewhere(run, params, recorder, fleet)
    })
    if (recorder !== undefined) {
      result.catch((error: unknown) => {
        if (run.phase !== 'refused') runLog.error({ err: error }, 'async run failed after its agent started')
      })
    }
    // Made when asked for: a refusal nobody awaits here is no unhandled rejection. Only recorded runs are asked (async
    // ones, and a worker's): an unrecorded run's caller waits for its result.
    const started = (): Promise<unknown> => recorder?.stored ?? result
    const settled = async (): Promise<void> => {
      await result.catch(() => undefined)
      await recorder?.done
    }
    return { run, result, accepted: async () => { await started(); return this.#acceptedState(run) }, settled }
  }

  /** Its state as its launch's caller is answered with: the worker's record once it went to one. */
  async #acceptedState(run: Run): Promise<RunState> {
    if (run.phase !== 'handed_over') return stateOf(run.snapshot())
    return stateOf((await this.#options.store.get(run.id)) ?? run.snapshot())
  }

  /** Handed to a worker; its result, once it has ended there, read back from the store. */
  async #launchElsewhere(
    run: Run, params: RunParams, recorder: RunRecorder, { queues, takeWithinMs }: RegistryFleet
  ): Promise<RunResult> {
    const { store } = this.#options
    const deps = this.#handOverDeps(queues, takeWithinMs, () => recorder.flushed())
    const { ended } = await launchElsewhere(run, params, deps)
    run.handOff()
    await ended
    const result = (await store.get(run.id))?.result
    if (result === null || result === undefined) throw new Error('the run ended on its worker without a result (lost)')
    // Counted where it was asked for: a worker listens to nothing, so its own metrics are nobody's to read.
    this.#options.metrics.observeRun(result, run.caller)
    return result
  }

  /** Handed to a worker, and lived here as its worker records it (a synchronous or streamed run's caller is here). */
  async #launchRelayed(
    run: Run, params: RunParams, sink: OutputSink | undefined, { queues, takeWithinMs }: RegistryFleet
  ): Promise<RunResult> {
    const { store, saveEveryMs } = this.#options
    await launchElsewhere(run, params, this.#handOverDeps(queues, takeWithinMs, async () => undefined))
    try {
      const result = await relayed(run, sink, {
        store, pollMs: saveEveryMs, stopElsewhere: (record) => this.#stopElsewhere(record)
      })
      run.finish(result)
      return result
    } catch (error) {
      run.abort(error)
      throw error
    }
  }

  #handOverDeps(queues: RunFleet, takeWithinMs: number, flushed: () => Promise<void>): HandOverDeps {
    const { launcher, store } = this.#options
    return {
      fleet: queues,
      takeWithinMs,
      slotFor: (run, queueTimeout) => launcher.slotFor(run, queueTimeout),
      flushed,
      // A session continues where it ran (sessions.ts): one resumed without naming its distro still goes into WSL.
      inWsl: async (tool, { wsl_distro: distro, resume }) => distro !== undefined ||
        (resume !== undefined && ((await store.session(tool, resume))?.wslDistro ?? null) !== null)
    }
  }

  #record(run: Run, log: FastifyBaseLogger): RunRecorder {
    const { store, replica, outputLimitBytes, saveEveryMs } = this.#options
    const recorder = new RunRecorder(run, { store, replica, outputLimitBytes, saveEveryMs, log })
    this.#recorded.set(run.id, recorder)
    void recorder.done.then(() => this.#recorded.delete(run.id))
    return recorder
  }

  #deliverWebhooks(run: Run, log: FastifyBaseLogger): void {
    const { store, replica, webhookDue, pushBody } = this.#options
    const delivering = deliverRunWebhooks(run, { outbox: store.outbox, replica, due: webhookDue, pushBody, log })
    this.#webhooksPending.add(delivering)
    void delivering.then(() => this.#webhooksPending.delete(delivering))
  }

  /** The webhook deliveries of a run of this caller's, oldest first; undefined when there is no such run. */
  async deliveries(id: string, caller: string): Promise<WebhookDeliveryState[] | undefined> {
    const deliveries = (await this.#options.store.outbox.deliveriesOf(id)).filter((each) => each.caller === caller)
    // A run without a webhook has none, but is there all the same; one no longer kept may still have its deliveries.
    if (deliveries.length === 0 && (await this.state(id, caller)) === undefined) return undefined
    return deliveries.map(deliveryState)
  }

  /** The A2A push configs a run of this caller's delivers to (from its deliveries: none before its agent starts). */
  async pushesOf(id: string, caller: string): Promise<Array<Pick<WebhookDelivery, 'url'> & PushForm>> {
    const deliveries = await this.#options.store.outbox.deliveriesOf(id)
    const pushes = new Map<string, Pick<WebhookDelivery, 'url'> & PushForm>()
    for (const { caller: owner, url, push } of deliveries) {
      if (owner === caller && push !== undefined) pushes.set(push.config, { url, ...push })
    }
    return [...pushes.values()]
  }

  /**
   * A push config added to an async run of this caller's as it waits or runs: its current status sent at once, its end
   * armed for whichever replica ends it (or fired now, if it ended as this was added). undefined: no such run.
   */
  async addPush(id: string, caller: string, push: RunPush): Promise<RunState | undefined> {
    const { store, replica, webhookDue, pushBody } = this.#options
    const state = await this.state(id, caller)
    if (state?.kind !== 'async') return undefined
    // Those that still have something to send: a config deleted, or whose deliveries all ended, costs nothing more.
    const configs = new Set((await store.outbox.deliveriesOf(id)).flatMap(({ caller: owner, push: form, state: now }) =>
      owner === caller && form !== undefined && (now === 'armed' || now === 'pending') ? [form.config] : []))
    if (!configs.has(push.config) && configs.size >= PUSH_CONFIGS_PER_RUN) {
      throw serviceError('VALIDATION_ERROR',
        `a task has at most ${String(PUSH_CONFIGS_PER_RUN)} push configs: delete one before adding another`)
    }
    await this.#options.launcher.assertPushTarget(caller, push.url)
    const runsOn = (await store.get(id))?.replica ?? replica
    await store.outbox.addDeliveries(await pushDeliveries(push, state, { caller, replica: runsOn }, pushBody))
    webhookDue()
    const now = (await this.state(id, caller))!
    if (isEndStatus(now.status)) await fireEnds(store.outbox, id, now, pushBody)
    return now
  }

  /** A run's push config removed: what it had not sent yet is not sent. false when the run has no such config. */
  async dropPush(id: string, caller: string, config: string): Promise<boolean> {
    const { outbox } = this.#options.store
    const its = (await outbox.deliveriesOf(id))
      .filter((delivery) => delivery.caller === caller && delivery.push?.config === config)
    for (const delivery of its) await outbox.dropDelivery(delivery.id)
    return its.length > 0
  }

  /** The whole diff of a worktree run of this caller's, kept on this replica; undefined when there is none. */
  diff(id: string, caller: string): ReturnType<RunWorktrees['diff']> {
    return this.#options.diffs.diff(caller, id)
  }

  /** A run of this caller's; undefined for an unknown run and for another caller's alike. */
  async state(id: string, caller: string): Promise<RunState | undefined> {
    const found = this.#inMemory(id)?.snapshot() ?? shown(await this.#options.store.get(id))
    return found?.caller === caller ? stateOf(found) : undefined
  }

  /** This caller's runs, newest first: async ones, and synchronous or streamed ones while they run. */
  async list(caller: string): Promise<RunSummary[]> {
    const live = [...this.#open.values()].filter((run) => run.caller === caller && run.listedLive)
    const liveIds = new Set(live.map((run) => run.id))
    // A run a worker runs is both here (its caller's replica, or the worker) and in the store.
    const stored = (await this.#options.store.list(caller)).filter((record) => !liveIds.has(record.id) && shown(record))
    return [...live.map((run) => run.snapshot()), ...stored]
      .map((found) => stateOf({ ...found, result: null }))
      .sort((a, b) => b.created_at.localeCompare(a.created_at))
      .map(({ result: _result, ...summary }) => summary)
  }

  /** The events of an async run of this caller's, for a follower; undefined when there is none to follow. */
  async feed(id: string, caller: string): Promise<Feed | undefined> {
    const source = await this.#eventsOf(id, caller)
    return source === undefined ? undefined : (lastId, choice, signal) => follow(source, lastId, choice, signal)
  }

  /** Its events in memory while this replica records it, else in the store. */
  async #eventsOf(id: string, caller: string): Promise<EventSource | undefined> {
    const recorder = this.#recorderOf(id)
    if (recorder !== undefined) {
      const { kind, caller: owner } = recorder.run
      return kind === 'async' && owner === caller ? logSource(recorder.events) : undefined
    }
    const { store, saveEveryMs } = this.#options
    const record = await store.get(id)
    // A synchronous or streamed run's events are its own caller's stream, as on the replica that runs it.
    return record?.caller === caller && record.kind === undefined ? storeSource(store, record, saveEveryMs) : undefined
  }

  /** Stops a run of this caller's (its whole process tree, wherever it runs) and answers with its final state. */
  async cancel(id: string, caller: string): Promise<RunState | undefined> {
    const run = this.#inMemory(id)
    if (run !== undefined) {
      if (run.caller !== caller) return undefined
      run.stop('cancelled')
      const recorder = this.#recorderOf(id)
      if (recorder !== undefined) {
        await recorder.done
        // Its worker had it already: reached as any other replica's run.
        if (run.phase === 'handed_over') return this.#cancelStored(id, caller)
        return stateOf(run.snapshot())
      }
      await run.ended()
      // Its result went to its own caller; here, only that it was cancelled.
      return { ...stateOf(run.snapshot()), status: 'cancelled', result: null }
    }
    return this.#cancelStored(id, caller)
  }

  async #cancelStored(id: string, caller: string): Promise<RunState | undefined> {
    const record = await this.#options.store.get(id)
    if (record?.caller !== caller) return undefined
    if (isEndStatus(record.status)) return stateOf(record)
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
    await Promise.all(this.#webhooksPending)
  }

  /**
   * A run of this replica's that may be told of by its id: a synchronous or streamed one while its agent runs, an
   * async one once it is stored (before, nobody was given its id) until its end is.
   */
  #inMemory(id: string): Run | undefined {
    const recorded = this.#recorderOf(id)?.run
    if (recorded !== undefined) return recorded
    const run = this.#open.get(id)
    return run?.listedLive === true ? run : undefined
  }

  /** An async run of this replica's whose agent started (before, nobody was given its id). */
  #recorderOf(id: string): RunRecorder | undefined {
    const recorder = this.#recorded.get(id)
    return recorder?.storing === true ? recorder : undefined
  }

  /**
   * Asks the replica holding it (running it, or where it waits its turn) to stop it, and waits (bounded) for that
   * replica to record its end. The request is repeated while the run is seen live: a message sent while that replica
   * was reconnecting is not lost for good.
   */
  async #stopElsewhere(record: RunRecord): Promise<RunRecord> {
    const deadline = Date.now() + this.#options.remoteStopWaitMs
    let current = record
    while (!isEndStatus(current.status) && Date.now() < deadline) {
      await this.#options.store.requestCancel(current)
      await sleep(this.#options.saveEveryMs)
      current = (await this.#options.store.get(record.id)) ?? current
    }
    return current
  }
}

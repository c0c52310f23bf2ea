import { serviceError, ServiceError, type ErrorCode } from '../errors.js'
import type { RunParams } from '../schemas/run.js'
import type { SlotLease } from '../slots/limiter.js'
import { stopRefusal, type Run, type RunPush } from './run.js'

// ROLE=api: a run is admitted here (its slot of the fleet's limit, its turn in the queue) and handed to a worker of the
// fleet, which runs it as it would any run and records it in the shared store from its start. Nothing of its agent
// happens here; this replica only learns whether it started, and why not (a synchronous or streamed run then follows
// it in the store: relay.ts).

/** What a worker needs to run a run handed to it, as it travels (JSON). */
export interface HandedRun {
  /** How its caller asked for it (async when absent): a worker records every run it takes, whatever its kind. */
  kind?: 'sync' | 'stream'
  params: RunParams
  caller: string
  createdAt: string
  /** The slot it was admitted with (`SlotLease.holder`), which the worker adopts. */
  slot: string
  context?: string
  push?: RunPush
  /** It runs inside WSL (asked for, or its session's place): only a worker on a Windows host can run it. */
  wsl?: true
}

/** How a worker's run went, as far as the replica that handed it over cares. */
export type WorkerAnswer =
  /** Its agent started and the store has its record. */
  | { started: true }
  /** Refused before any agent started, as a local run would have been. */
  | { refused: { code: ErrorCode; message: string } }

/** A run handed to the fleet, as the replica that handed it over follows it. */
interface HandedOver {
  /** Once the worker answered; `lost` when it went silent first (killed, its host gone). */
  answer: Promise<WorkerAnswer | { lost: true }>
  /** Once the run has ended on its worker, however (its end is in the store, or it was lost). */
  ended: Promise<void>
  /** Takes it back while no worker has taken it (true); false once one has. */
  withdraw: () => Promise<boolean>
  /** Calls `listener` each time a worker with no room for it gives it back (it waits for another then). */
  onGivenBack: (listener: () => void) => void
}

/** The fleet's queues, as runs/ needs them (fleet/run-jobs.ts is the one there is). */
export interface RunFleet {
  handOver(tool: string, runId: string, run: HandedRun): Promise<HandedOver>
}

export interface HandOverDeps {
  fleet: RunFleet
  /** The run's slot: now, or once its turn comes within `queue_timeout` (the launcher's queue). */
  slotFor: (run: Run, queueTimeout: number) => Promise<SlotLease>
  /** What was being written of the run is written: its record changes hands next. */
  flushed: () => Promise<void>
  /** How long a run admitted waits for a worker to take it before it is withdrawn. */
  takeWithinMs: number
  /** Whether it runs inside WSL: asked for, or where the session it resumes ran. */
  inWsl: (tool: string, params: RunParams) => Promise<boolean>
}

/**
 * Admits the run and hands it over; resolves once a worker started its agent with when it ends there (the caller says
 * what the run becomes here), rejects with what refused it otherwise (the run `refused`): the same refusals a local
 * run gets, plus no worker in time.
 */
export async function launchElsewhere(
  run: Run, params: RunParams, deps: HandOverDeps
): Promise<{ ended: Promise<void> }> {
  try {
    run.advance('placed')
    run.advance('waiting_for_slot')
    const lease = await deps.slotFor(run, params.queue_timeout ?? 0)
    let answer: WorkerAnswer
    let ended: Promise<void>
    try {
      run.advance('starting')
      ;({ answer, ended } = await handedTo(run, params, lease, deps))
    } finally {
      lease.release()
    }
    if ('refused' in answer) throw new ServiceError(answer.refused.code, answer.refused.message)
    return { ended }
  } catch (error) {
    run.abort(error)
    throw error
  }
}

/** The worker's answer; the lease handed off once the worker started its agent (released by the caller otherwise). */
async function handedTo(
  run: Run, params: RunParams, lease: SlotLease, deps: HandOverDeps
): Promise<{ answer: WorkerAnswer; ended: Promise<void> }> {
  await deps.flushed()
  const { caller, context, push, kind } = run
  const handed = await deps.fleet.handOver(run.tool, run.id, {
    ...(kind === 'async' ? {} : { kind }),
    params,
    caller,
    createdAt: run.createdAt.toISOString(),
    slot: lease.holder!,
    ...(context === undefined ? {} : { context }),
    ...(push === undefined ? {} : { push }),
    ...((await deps.inWsl(run.tool, params)) ? { wsl: true as const } : {})
  })
  // Taken back, once it should be (stopped: DELETE, its client gone, shutdown; or no worker in time), whenever no
  // worker has it: then, and again each time a worker with no room gives it back. Once a worker has it, DELETE reaches
  // it through the store, as any replica's run, and its answer is waited for.
  let takeBack: (() => ServiceError) | undefined
  let settled = false
  let early!: { resolve: (answer: WorkerAnswer) => void; reject: (error: unknown) => void }
  const takenBack = new Promise<WorkerAnswer>((resolve, reject) => { early = { resolve, reject } })
  const tryTakingBack = (): void => {
    if (takeBack === undefined || settled) return
    const why = takeBack
    handed.withdraw().then((withdrawn) => {
      if (withdrawn) early.resolve({ refused: refusalOf(why()) })
    }, early.reject)
  }
  const timer = setTimeout(() => {
    takeBack ??= () => serviceError('NO_WORKER', run.tool, deps.takeWithinMs / 1000)
    tryTakingBack()
  }, deps.takeWithinMs)
  const stop = (): void => {
    takeBack = () => serviceError(stopRefusal(run.stopReason!))
    tryTakingBack()
  }
  if (run.stopped) stop()
  else run.signal.addEventListener('abort', stop, { once: true })
  handed.onGivenBack(tryTakingBack)
  let answer: WorkerAnswer | { lost: true }
  try {
    answer = await Promise.race([handed.answer, takenBack])
  } finally {
    settled = true
    clearTimeout(timer)
    run.signal.removeEventListener('abort', stop)
  }
  // Renewed here until its agent started there: a worker may hold a run it took a moment before it has room for it.
  if ('started' in answer) lease.handOff()
  return {
    answer: 'lost' in answer ? { refused: refusalOf(serviceError('WORKER_LOST', run.tool)) } : answer,
    ended: handed.ended
  }
}

const refusalOf = (error: ServiceError): { code: ErrorCode; message: string } =>
  ({ code: error.code, message: error.message })

import { once } from 'node:events'
import { Worker } from 'node:worker_threads'
import type { OutputSink } from '../process/agent-process.js'
import type { LimitReason } from '../schemas/limits.js'
import type { Step } from '../schemas/steps.js'
import type { StepsReport, StepsWatch } from './run-steps.js'

/**
 * How many bytes of one run's stdout may wait for the thread at most: past it, the run's pipes pause until the thread
 * has read them (what a run holds stays bounded, whatever its agent writes and however fast).
 */
export const STEPS_IN_FLIGHT_BYTES = 1024 * 1024

/** What the thread is told of each run: opened (its agent's parser, its budget), its stdout chunk by chunk, its end. */
export type ToStepsThread =
  | {
    type: 'open'
    run: number
    agent: string
    watch: Pick<StepsWatch, 'pricing' | 'limits'>
    /**
     * Int32 [0]: the bytes of this run read, modulo 2³²: counted by the thread as it reads them, or, for those whose
     * steps it sends, by the relay's thread once it has told them.
     */
    read: SharedArrayBuffer
  }
  | { type: 'chunk'; run: number; bytes: Uint8Array; sendSteps: boolean }
  | { type: 'end'; run: number }
  /** No more runs: the thread lets go of its port and ends by itself (its coverage and buffers written as it exits). */
  | { type: 'close' }

/** What it tells back: the steps of a chunk (when someone follows them), the limit crossed, the report at the end. */
export type FromStepsThread =
  /** `bytes`: how many bytes of the run they end, which the relay's thread counts read once it has told them. */
  | { type: 'steps'; run: number; steps: Step[]; bytes: number }
  | { type: 'limit'; run: number; reason: LimitReason }
  | { type: 'report'; run: number; report: StepsReport }

/** One run's steps as the thread reads them: its stdout goes in as a sink, the report comes out at its end. */
export interface ThreadSteps {
  sink: OutputSink
  /** The output has ended: the report once the thread has read all of it; null if the thread died first. */
  end(): Promise<StepsReport | null>
}

/** What the main thread keeps of an open run: its watchers, and what waits on the thread. */
interface OpenRun {
  watch: StepsWatch
  read: Int32Array
  /** The bytes posted, modulo 2³² as the thread's count is. */
  posted: number
  resume: (() => void) | undefined
  waiting: boolean
  /** Its thread died: nothing of it is waited for any more. */
  lost: boolean
  ended: (report: StepsReport | null) => void
}

/** How long a closing thread is given to end by itself. */
const CLOSE_WAIT_MS = 1000

/** How long a run behind waits on the thread's count before it looks again. */
const LOOK_AGAIN_MS = 1000

/** Bytes of a run counted read, on either thread: whoever waits for the count is woken. */
export function counted(read: Int32Array, bytes: number): void {
  Atomics.add(read, 0, bytes)
  Atomics.notify(read, 0)
}

const inFlight = (run: OpenRun): number => (run.posted - Atomics.load(run.read, 0)) >>> 0

/**
 * The thread the built-in agents' structured output is parsed on, off the one that relays it: JSON.parse and the
 * parsers cost the relay a third of its throughput on that thread (bench/findings.md). One thread for the service,
 * started with its first run that needs it; a thread that dies ends the reading of every run it held (their results
 * say no steps), and the next run starts another.
 */
export class StepsThread {
  readonly #entry: URL
  readonly #died: (error: Error) => void
  #worker: Worker | undefined
  readonly #runs = new Map<number, OpenRun>()
  #nextRun = 0
  #closed = false

  /** `died`: told when the thread fails (the runs it held then end without their steps). */
  constructor(died: (error: Error) => void, entry = new URL('./steps-thread-entry.js', import.meta.url)) {
    this.#died = died
    this.#entry = entry
  }

  /** Reads one run's stdout with its agent's parser; null once the service is closing. */
  open(agent: string, watch: StepsWatch, wantsSteps: () => boolean): ThreadSteps | null {
    if (this.#closed) return null
    const worker = this.#started()
    const id = ++this.#nextRun
    const shared = new SharedArrayBuffer(4)
    let ended!: (report: StepsReport | null) => void
    const report = new Promise<StepsReport | null>((resolve) => { ended = resolve })
    const run: OpenRun = {
      watch, read: new Int32Array(shared), posted: 0, resume: undefined, waiting: false, lost: false, ended
    }
    this.#runs.set(id, run)
    const { pricing, limits } = watch
    this.#post(worker, { type: 'open', run: id, agent, watch: { pricing, limits }, read: shared })
    const sink: OutputSink = {
      write: (chunk) => {
        // Its thread is gone: nothing is read any more, nothing to wait for.
        if (run.lost) return true
        // A copy whose memory moves to the thread: the chunk itself is still the relay's and the output's.
        const bytes = new Uint8Array(chunk)
        run.posted = (run.posted + bytes.length) >>> 0
        this.#post(worker, { type: 'chunk', run: id, bytes, sendSteps: wantsSteps() }, [bytes.buffer])
        return inFlight(run) <= STEPS_IN_FLIGHT_BYTES
      },
      onDrain: (resume) => {
        run.resume = resume
        this.#awaitRead(run)
      }
    }
    return {
      sink,
      end: () => {
        if (this.#runs.has(id)) this.#post(worker, { type: 'end', run: id })
        return report
      }
    }
  }

  /** Stops the thread: every run still read gets no report. Ended if it has not ended by itself within a second. */
  async close(): Promise<void> {
    this.#closed = true
    const worker = this.#worker
    if (worker === undefined) return
    const exited = once(worker, 'exit')
    this.#post(worker, { type: 'close' })
    const timer = setTimeout(() => { void worker.terminate() }, CLOSE_WAIT_MS)
    await exited
    clearTimeout(timer)
  }

  #started(): Worker {
    if (this.#worker !== undefined) return this.#worker
    const worker = new Worker(this.#entry)
    // The thread serves runs: it never keeps the service alive on its own.
    worker.unref()
    worker.on('message', (message: FromStepsThread) => { this.#told(message) })
    worker.on('error', (error) => {
      this.#died(error)
      this.#lost(worker)
    })
    worker.on('exit', () => { this.#lost(worker) })
    this.#worker = worker
    return worker
  }

  #post(worker: Worker, message: ToStepsThread, transfer?: ArrayBuffer[]): void {
    worker.postMessage(message, transfer)
  }

  #told(message: FromStepsThread): void {
    const run = this.#runs.get(message.run)
    if (run === undefined) return
    if (message.type === 'steps') {
      for (const step of message.steps) run.watch.onStep?.(step)
      if (message.bytes > 0) counted(run.read, message.bytes)
    } else if (message.type === 'limit') run.watch.onLimit?.(message.reason)
    else {
      this.#runs.delete(message.run)
      run.ended(message.report)
    }
  }

  /** The run is behind: its reader resumes once the thread has read enough of what waits (woken by its count). */
  #awaitRead(run: OpenRun): void {
    if (run.waiting || run.lost) return
    const seen = Atomics.load(run.read, 0)
    if (inFlight(run) <= STEPS_IN_FLIGHT_BYTES) {
      const resume = run.resume
      run.resume = undefined
      resume?.()
      return
    }
    run.waiting = true
    // Looked at again now and then all the same: a thread that dies between two counts never wakes anyone.
    const wait = Atomics.waitAsync(run.read, 0, seen, LOOK_AGAIN_MS)
    const again = (): void => {
      run.waiting = false
      this.#awaitRead(run)
    }
    if (wait.async) void wait.value.then(again)
    else again()
  }

  /** The thread is gone (a crash, or closed): the runs it held end without steps, their pipes free to flow. */
  #lost(worker: Worker): void {
    if (this.#worker !== worker) return
    this.#worker = undefined
    for (const run of this.#runs.values()) {
      run.lost = true
      run.resume?.()
      run.ended(null)
    }
    this.#runs.clear()
  }
}

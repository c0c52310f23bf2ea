import type { FastifyBaseLogger } from 'fastify'
import { RunEventLog } from './event-log.js'
import { OutputEvents } from './output-events.js'
import type { Run } from './run.js'
import type { RunRecord, RunStore } from './stores/run-store.js'

export interface RecorderOptions {
  store: RunStore
  replica: string
  outputLimitBytes: number
  /** How often the run's new events are saved (what a crash can lose, what other replicas lag). */
  saveEveryMs: number
  log: FastifyBaseLogger
}

/**
 * What an async run leaves behind, written as its phases come: stored once its agent runs (so that any replica can
 * find it), its events kept in a bounded log and saved as they come, its end stored with its result. It belongs to no
 * connection: only its own run's phases drive it.
 */
export class RunRecorder {
  readonly run: Run
  readonly events: RunEventLog
  record: RunRecord
  readonly #options: RecorderOptions
  readonly #output = new OutputEvents()
  /** Its agent started, and its record went to the store. */
  storing = false
  #savedUpTo = 0
  #saving: Promise<void> = Promise.resolve()
  #saver: NodeJS.Timeout | undefined
  /** Resolves once the run is stored as running; rejects as its launch did when it never ran, or the store failed. */
  readonly stored: Promise<void>
  readonly #stored: () => void
  readonly #refused: (error: unknown) => void
  /** Resolves once the run's end is stored (or could not be). */
  readonly done: Promise<void>
  readonly #finished: () => void

  constructor(run: Run, options: RecorderOptions) {
    this.run = run
    this.#options = options
    this.events = new RunEventLog(options.outputLimitBytes)
    this.record = this.#recordNow()
    const settle: { stored?: () => void; refused?: (error: unknown) => void; finished?: () => void } = {}
    this.stored = new Promise((resolve, reject) => {
      settle.stored = resolve
      settle.refused = reject
    })
    this.done = new Promise((resolve) => { settle.finished = resolve })
    this.#stored = settle.stored!
    this.#refused = settle.refused!
    this.#finished = settle.finished!
    // Nobody awaits a refusal the caller was already told of by the launch itself.
    this.stored.catch(() => undefined)
    run.on('phase', () => this.#enter())
    // Accepted as it starts waiting for a slot: stored then, so that any replica finds it queued.
    run.on('queued', () => { if (!this.storing) this.#store() })
    // No reader can slow the agent down here: the log keeps what it may, bounded.
    run.on('output', (chunk) => {
      const event = this.#output.next(chunk)
      if (event !== null) this.events.appendOutput(event)
    })
    run.on('step', (step) => this.events.appendStep(step))
  }

  #recordNow(): RunRecord {
    const { kind, ...record } = this.run.snapshot()
    return { ...record, ...(kind === 'async' ? {} : { kind }), replica: this.#options.replica }
  }

  #enter(): void {
    const { phase } = this.run
    if (phase === 'running') this.#store()
    // Refused after it was accepted (its wait in the queue over, DELETE while it waited): its end is stored.
    else if (phase === 'refused' && this.storing) void this.#end()
    // The launch's refusal, for the caller of POST /runs (the run never ran, nothing was stored).
    else if (phase === 'refused') this.#refuse(this.run.refusal)
    else if (phase === 'finished' || phase === 'failed') void this.#end()
    // A fleet's worker records it from now on: one writer at a time.
    else if (phase === 'handed_over') void this.#leave()
  }

  /** What was being written is written (before the run changes hands). */
  async flushed(): Promise<void> {
    await this.#saving
  }

  async #leave(): Promise<void> {
    clearInterval(this.#saver)
    await this.#saving
    this.#stored()
    this.#finished()
  }

  #refuse(error: unknown): void {
    this.#refused(error)
    this.#finished()
  }

  #store(): void {
    const { store, saveEveryMs } = this.#options
    this.record = this.#recordNow()
    if (this.storing) {
      // Stored while it waited: now as running.
      const running = this.record
      this.#saving = this.#saving
        .then(() => store.create(running))
        .catch((error: unknown) => this.#options.log.error({ err: error }, 'could not store the run as running'))
      return
    }
    this.storing = true
    this.#saving = store.create(this.record)
    this.#saver = setInterval(() => void this.#save(), saveEveryMs)
    this.#saving.then(
      () => this.#stored(),
      (error: unknown) => {
        // Answered with the store's error: a run nobody could find again must not run on.
        this.run.stop('cancelled')
        this.#refused(error)
      }
    )
  }

  async #end(): Promise<void> {
    clearInterval(this.#saver)
    this.events.close(this.#output.closing(this.run.result))
    // Stopped by DELETE or by shutdown, a run was cancelled; a caller that vanished cannot stop an async run.
    this.record = this.#recordNow()
    await this.#save()
    try {
      await this.#options.store.finish(this.record)
    } catch (error) {
      this.#options.log.error({ err: error }, 'could not store the run’s end')
    } finally {
      this.#finished()
    }
  }

  /** Saves what the log kept since the last save; saves run one after another, never two at once. */
  #save(): Promise<void> {
    this.#saving = this.#saving
      .then(async () => {
        const events = this.events.after(this.#savedUpTo)
        if (events.length === 0) return
        this.#savedUpTo = events.at(-1)!.id
        await this.#options.store.saveEvents(this.record.id, events, this.events.dropped())
      })
      .catch((error: unknown) => this.#options.log.error({ err: error }, 'could not save the run’s events'))
    return this.#saving
  }
}

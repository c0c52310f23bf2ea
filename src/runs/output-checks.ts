import { once } from 'node:events'
import { Worker } from 'node:worker_threads'
import type { StructuredRead } from './output-schema.js'

/**
 * How long one answer's check may take once its thread has it: Ajv's keywords that are not linear (`uniqueItems` over
 * objects compares every pair) are bounded by time, whatever the schema and the answer.
 */
const OUTPUT_CHECK_BUDGET_MS = 5000

/** The heap a check's thread may grow to: an answer's end is 256 KiB, its parses and errors far less than this. */
const CHECK_HEAP_MB = 64

/** How long a closing thread is given to end by itself. */
const CLOSE_WAIT_MS = 1000

/** What the thread is told: an answer's end and its schema, or that there will be no more. */
export type ToOutputChecks = { type: 'check'; answer: string; schema: object } | { type: 'close' }

/** What it tells back: it has loaded and waits for answers, or what one answer's check found. */
export type FromOutputChecks = { type: 'ready' } | { type: 'read'; read: StructuredRead }

interface Check {
  answer: string
  schema: object
  done: (read: StructuredRead) => void
}

const unchecked = (message: string): StructuredRead =>
  ({ error: { code: 'OUTPUT_SCHEMA_MISMATCH', message, schema_errors: [] } })

/**
 * Answers checked against their `output_schema` on a thread of their own, one at a time, each within a time budget
 * that starts when the thread takes it: a check past it is ended with its thread (the only way to stop a loop that
 * never yields) and the next check gets a new thread. Nothing of a schema or an answer runs on the service's thread.
 */
export class OutputChecks {
  readonly #entry: URL
  readonly #budgetMs: number
  readonly #waiting: Check[] = []
  #worker: Worker | undefined
  #ready = false
  #current: { check: Check; timer: NodeJS.Timeout } | undefined
  #closed = false

  constructor(budgetMs = OUTPUT_CHECK_BUDGET_MS, entry = new URL('./output-checks-entry.js', import.meta.url)) {
    this.#budgetMs = budgetMs
    this.#entry = entry
  }

  /** The object the answer ends with, valid against the schema, or why not (too long to check among the reasons). */
  check(answer: string, schema: object): Promise<StructuredRead> {
    return new Promise((resolve) => {
      this.#waiting.push({ answer, schema, done: resolve })
      this.#next()
    })
  }

  /** Ends the thread once the checks asked for are done (each bounded by the budget). */
  async close(): Promise<void> {
    this.#closed = true
    this.#next()
    // A check past its budget meanwhile hands what waits to a new thread: wait for that one too.
    for (let worker = this.#worker; worker !== undefined; worker = this.#worker) await once(worker, 'exit')
  }

  #next(): void {
    if (this.#current !== undefined) return
    const check = this.#waiting.shift()
    if (check === undefined) {
      if (this.#closed) this.#end()
      return
    }
    const worker = this.#started()
    if (!this.#ready) {
      this.#waiting.unshift(check)
      return
    }
    const timer = setTimeout(() => {
      this.#finish(unchecked(`the answer could not be checked against output_schema within ${this.#budgetMs} ms`))
      this.#lose(worker, 'past its budget')
    }, this.#budgetMs)
    this.#current = { check, timer }
    worker.postMessage({ type: 'check', answer: check.answer, schema: check.schema } satisfies ToOutputChecks)
  }

  #started(): Worker {
    if (this.#worker !== undefined) return this.#worker
    const worker = new Worker(this.#entry, { resourceLimits: { maxOldGenerationSizeMb: CHECK_HEAP_MB } })
    this.#worker = worker
    this.#ready = false
    worker.on('message', (message: FromOutputChecks) => {
      // A thread already let go of may still have been answering: what it says is no check's any more.
      if (this.#worker !== worker) return
      if (message.type === 'ready') this.#ready = true
      else this.#finish(message.read)
      this.#next()
    })
    // A check that failed its thread (out of its heap, a throw): that check fails, the next one gets a new thread.
    worker.on('error', (error) => { this.#lose(worker, error.message) })
    worker.on('exit', () => { this.#lose(worker, 'its thread ended') })
    return worker
  }

  #finish(read: StructuredRead): void {
    const current = this.#current
    if (current === undefined) return
    this.#current = undefined
    clearTimeout(current.timer)
    current.check.done(read)
  }

  /**
   * The thread is gone or going: the check it held failed, and what waits goes to a new one; a thread that failed
   * before it could take any check fails them all (another would too).
   */
  #lose(worker: Worker, reason: string): void {
    if (this.#worker !== worker) return
    this.#worker = undefined
    void worker.terminate()
    const failed = unchecked(`the answer could not be checked against output_schema: ${reason}`)
    this.#finish(failed)
    if (!this.#ready) for (const check of this.#waiting.splice(0)) check.done(failed)
    this.#next()
  }

  /** Lets the idle thread end by itself (it writes what it ran as it exits), or ends it past a second. */
  #end(): void {
    const worker = this.#worker
    if (worker === undefined) return
    worker.postMessage({ type: 'close' } satisfies ToOutputChecks)
    setTimeout(() => { void worker.terminate() }, CLOSE_WAIT_MS).unref()
  }
}

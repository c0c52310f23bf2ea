import { Queue, QueueEvents, WaitingError, Worker, type Job } from 'bullmq'
import { Redis } from 'ioredis'
import { ToolRoom } from './tool-room.js'

// Runs as BullMQ jobs (issue 40): an API replica hands a run to whichever worker of the fleet has room for its tool,
// and learns when it starts and how it ends; a worker takes at most its own number of runs of each tool at once. A run
// is never run twice: one attempt, and a job whose worker went silent is lost, never given to another (agents are not
// idempotent). What the run does meanwhile (its output, its stop) travels through the run store, as any run's does.

export interface FleetOptions {
  /** The fleet's Redis (REDIS_URL). */
  url: string
  /** Keys' prefix: fleets (and tests) sharing one Redis stay apart. */
  prefix: string
  /** How long a worker's hold on a run lasts unrenewed: a worker silent this long has lost its runs. */
  lockDurationMs: number
}

/** How a handed-over run ended, as the replica that handed it over learns it. */
export type RunOutcome =
  | { end: 'completed'; value: unknown }
  | { end: 'failed'; reason: string }
  /** Its worker went silent past `lockDurationMs` (killed, its host gone): the run is not run again. */
  | { end: 'lost' }

/** What its worker said of a run first: what it reported while running it, or how the run ended before that. */
export type FirstWord = { reported: unknown } | RunOutcome

/** A run handed to the fleet, as the replica that handed it over follows it. */
export interface HandedOver {
  /** When a worker took it. */
  taken: Promise<void>
  /** Its worker's first word on it. */
  answer: Promise<FirstWord>
  /** How it ended. */
  ended: Promise<RunOutcome>
  /** Takes it back while no worker has taken it yet (true); false once one has. */
  withdraw: () => Promise<boolean>
  /** Calls `listener` each time a worker with no room for it gives it back to its queue. */
  onGivenBack: (listener: () => void) => void
}

/**
 * Where on its worker's host a run goes: WSL runs (`wsl_distro`) only to Windows workers (AGENT_HOST_PLATFORM=win32),
 * which take the others too. Each is a queue of its own, so that a worker is offered only what it can run.
 */
export type RunPlace = 'host' | 'wsl'
const RUN_PLACES: readonly RunPlace[] = ['host', 'wsl']

/** A tool's queue for one place: BullMQ keeps `:` for its own keys. */
export const queueName = (tool: string, place: RunPlace): string =>
  place === 'host' ? `runs.${tool}` : `runs.${tool}.${place}`

/** A job's states once a worker took it. */
const TAKEN = new Set(['active', 'completed', 'failed'])

/** A job's record is kept this long after its end (seconds): enough to read how it ended, never forever. */
const KEPT_AFTER_END_S = 3600

/**
 * The connections of one side, each closed with it (BullMQ leaves a connection it was given open). Commands wait for
 * Redis rather than fail: BullMQ blocks on some, and retries them itself.
 */
class Connections {
  readonly #made: Redis[] = []
  constructor(readonly url: string) {}

  next(): Redis {
    const redis = new Redis(this.url, { maxRetriesPerRequest: null })
    // Reported by the commands that fail, and retried by BullMQ: an event nobody listens to would end the process.
    redis.on('error', () => undefined)
    this.#made.push(redis)
    return redis
  }

  close(): void {
    for (const redis of this.#made) redis.disconnect()
  }
}

interface Following {
  taken: () => void
  givenBack: () => void
  reported: (value: unknown) => void
  settle: (outcome: RunOutcome) => void
}

/** One tool's queue as a replica that hands runs over sees it. */
interface ToolQueue {
  queue: Queue
  events: QueueEvents
  /** Finds runs whose worker went silent, even once no worker is left to find them. */
  stalledChecker: Worker
}

/** The handing-over side: an API replica's. */
export class RunDispatch {
  readonly #options: FleetOptions
  readonly #connections: Connections
  readonly #connection: Redis
  /** By queue name: each tool's, one for each place. */
  readonly #queues = new Map<string, ToolQueue>()
  readonly #following = new Map<string, Following>()

  constructor(options: FleetOptions, tools: readonly string[]) {
    this.#options = options
    this.#connections = new Connections(options.url)
    this.#connection = this.#connections.next()
    for (const tool of tools) {
      for (const place of RUN_PLACES) this.#queues.set(queueName(tool, place), this.#toolQueue(queueName(tool, place)))
    }
  }

  /** Once every queue's events are followed (a run handed over earlier could end unseen). */
  async ready(): Promise<void> {
    await Promise.all([...this.#queues.values()].map(async ({ queue, events, stalledChecker }) => {
      await Promise.all([queue.waitUntilReady(), events.waitUntilReady()])
      await stalledChecker.startStalledCheckTimer()
    }))
  }

  /** Hands a run to the fleet: its id names its job, so one run is never queued twice. */
  async handOver(tool: string, runId: string, data: unknown, place: RunPlace = 'host'): Promise<HandedOver> {
    const { queue } = this.#queueOf(tool, place)
    let taken!: () => void
    let answer!: (first: FirstWord) => void
    let end!: (outcome: RunOutcome) => void
    const takenPromise = new Promise<void>((resolve) => { taken = resolve })
    const answerPromise = new Promise<FirstWord>((resolve) => { answer = resolve })
    const ended = new Promise<RunOutcome>((resolve) => {
      end = (outcome) => {
        this.#following.delete(runId)
        resolve(outcome)
      }
    })
    // Followed before it exists: its worker may take and end it before add() has answered.
    const givenBack: Array<() => void> = []
    this.#following.set(runId, {
      taken,
      givenBack: () => { for (const listener of givenBack) listener() },
      reported: (value) => answer({ reported: value }),
      settle: (outcome) => {
        answer(outcome)
        end(outcome)
      }
    })
    try {
      await queue.add(tool, data, {
        jobId: runId,
        attempts: 1,
        removeOnComplete: { age: KEPT_AFTER_END_S },
        removeOnFail: { age: KEPT_AFTER_END_S }
      })
    } catch (error) {
      this.#following.delete(runId)
      throw error
    }
    return {
      taken: takenPromise,
      answer: answerPromise,
      ended,
      onGivenBack: (listener) => { givenBack.push(listener) },
      withdraw: async () => {
        // remove() takes a job that is not locked, ended ones too: one a worker has (or has just ended, its end not
        // heard here yet) is not taken back. One Redis lost (restarted without its data) is: nothing will run it.
        if (TAKEN.has(await queue.getJobState(runId))) return false
        const removed = (await queue.remove(runId)) === 1
        // Its withdrawer knows why: no worker's word on it, only its end.
        if (removed) end({ end: 'failed', reason: 'withdrawn' })
        return removed
      }
    }
  }

  /** Runs of a tool handed over that no worker has taken yet, fleet-wide, wherever they go. */
  async waiting(tool: string): Promise<number> {
    const counts = await Promise.all(RUN_PLACES.map((place) => this.#queueOf(tool, place).queue.getWaitingCount()))
    return counts.reduce((sum, count) => sum + count, 0)
  }

  async close(): Promise<void> {
    await Promise.all([...this.#queues.values()].flatMap(({ queue, events, stalledChecker }) =>
      [queue.close(), events.close(), stalledChecker.close()]))
    this.#connections.close()
  }

  #queueOf(tool: string, place: RunPlace): ToolQueue {
    const found = this.#queues.get(queueName(tool, place))
    if (found === undefined) throw new Error(`no queue for ${tool}`)
    return found
  }

  #toolQueue(name: string): ToolQueue {
    const { prefix, lockDurationMs } = this.#options
    const events = new QueueEvents(name, { connection: this.#connections.next(), prefix })
    events.on('active', ({ jobId }) => { this.#following.get(jobId)?.taken() })
    // Moved back from active: a worker with no room gave it back (tool-room.ts).
    events.on('waiting', ({ jobId, prev }) => { if (prev === 'active') this.#following.get(jobId)?.givenBack() })
    events.on('progress', ({ jobId, data }) => { this.#following.get(jobId)?.reported(data) })
    events.on('completed', ({ jobId, returnvalue }) => {
      this.#following.get(jobId)?.settle({ end: 'completed', value: returnvalue })
    })
    events.on('failed', ({ jobId, failedReason }) => {
      this.#following.get(jobId)?.settle({ end: 'failed', reason: failedReason })
    })
    // One attempt and no stall allowed: a stalled run is never taken again (its next taker fails it at once).
    events.on('stalled', ({ jobId }) => { this.#following.get(jobId)?.settle({ end: 'lost' }) })
    return {
      queue: new Queue(name, { connection: this.#connection, prefix }),
      events,
      stalledChecker: new Worker(name, null, {
        connection: this.#connections.next(),
        prefix,
        autorun: false,
        ...stallOptions(lockDurationMs)
      })
    }
  }
}

/** No run survives a stall: a worker silent for `lockDurationMs` has lost it. Checked twice as often. */
const stallOptions = (lockDurationMs: number) =>
  ({ maxStalledCount: 0, lockDuration: lockDurationMs, stalledInterval: Math.max(1, Math.floor(lockDurationMs / 2)) })

/**
 * What a worker does with a run it took; what it returns is the run's outcome, what it throws its failure. `report`
 * tells the replica that handed it over (its first report is that replica's answer).
 */
export type RunHandler = (
  tool: string, runId: string, data: unknown, report: (value: object) => Promise<void>
) => Promise<unknown>

/**
 * The taking side: a worker's, at most `concurrency[tool]` runs of each tool at once wherever they go on its host, from
 * the queues of the places it takes (`places`).
 */
export class RunWorkers {
  readonly #connections: Connections
  readonly #workers: Worker[]

  constructor(options: FleetOptions & { name: string }, concurrency: Readonly<Record<string, number>>,
    handler: RunHandler, places: readonly RunPlace[] = ['host']) {
    const { prefix, lockDurationMs, name } = options
    this.#connections = new Connections(options.url)
    this.#workers = Object.entries(concurrency).flatMap(([tool, most]) => {
      const takers: Worker[] = places.map((place) => new Worker(
        queueName(tool, place),
        async (job: Job, token?: string): Promise<unknown> => {
          if (!room.enter()) {
            // Back to the head of its queue, for a worker with room: not an attempt, and nothing of it started.
            await job.moveToWait(token)
            throw new WaitingError()
          }
          try {
            return await handler(tool, job.id!, job.data, (value) => job.updateProgress(value))
          } finally {
            room.leave()
          }
        },
        { connection: this.#connections.next(), prefix, concurrency: most, name, ...stallOptions(lockDurationMs) }
      ))
      const room: ToolRoom = new ToolRoom(most, takers)
      return takers
    })
  }

  async ready(): Promise<void> {
    await Promise.all(this.#workers.map((worker) => worker.waitUntilReady()))
  }

  /** Takes no new run; resolves once the runs it has taken have ended. */
  async close(): Promise<void> {
    await Promise.all(this.#workers.map((worker) => worker.close()))
    this.#connections.close()
  }
}

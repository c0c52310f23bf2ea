import type { SlotLease, SlotLimiter } from './limiter.js'

/**
 * What stops a wait. Asked whether it stopped before anything listens: an AbortSignal costs a few microseconds to make,
 * which a run given a slot or refused at once (most of them) never needs.
 */
export interface Stoppable {
  readonly stopped: boolean
  readonly signal: AbortSignal
}

/** What a run asks of the queue: how long it may wait, what stops it waiting, who is told its place. */
export interface QueueRequest {
  /** 0: never wait (a full tool refuses at once). */
  waitMs: number
  stop: Stoppable
  /** Its place whenever it changes, 1 being next; told only while it waits. */
  onPosition?: (position: number) => void
}

/** Why no slot was given: the tool full (no waiting asked), too many waiting, the wait over, or the run stopped. */
export type QueueRefusal = 'full' | 'queue_full' | 'timed_out' | 'stopped'

export type QueueAnswer = { lease: SlotLease } | { refused: QueueRefusal }

interface Waiter {
  settle: (answer: QueueAnswer) => void
  onPosition: ((position: number) => void) | undefined
}

/** Read through a call: it may have stopped across an await, whatever the type checker narrowed. */
const stopped = (stop: Stoppable): boolean => stop.stopped

/**
 * A slot of a limit shared with other replicas may free up there unheard here (its holder gone silent past its TTL,
 * Redis not telling): while runs wait, the limiter is asked again this often.
 */
const RETRY_EVERY_MS = 200

export interface SlotQueueOptions {
  /** Told a tool's count each time a run joins or leaves its queue (a fleet sums every replica's). */
  onQueued?: (tool: string, queued: number) => void
  retryEveryMs?: number
}

/**
 * Runs waiting for a slot of their tool, first come first served: each slot that frees up goes to the one waiting
 * longest, never to a newcomer while others wait. A wait ends with a slot, its time up, or its run stopped (the client
 * gone, DELETE, shutdown): a run stopped while waiting never starts.
 */
export class SlotQueue {
  readonly #slots: SlotLimiter
  readonly #maxQueued: ReadonlyMap<string, number>
  readonly #waiting = new Map<string, Waiter[]>()
  /** Tools whose waiters are being served now: one pass at a time per tool keeps the order. */
  readonly #serving = new Set<string>()
  /** Tools a slot was heard freed for while a pass served them: that pass asks once more rather than stop. */
  readonly #askAgain = new Set<string>()
  readonly #onQueued: ((tool: string, queued: number) => void) | undefined
  readonly #retryEveryMs: number
  #retry: NodeJS.Timeout | undefined

  constructor(slots: SlotLimiter, maxQueued: Record<string, number>, options: SlotQueueOptions = {}) {
    this.#slots = slots
    this.#maxQueued = new Map(Object.entries(maxQueued))
    this.#onQueued = options.onQueued
    this.#retryEveryMs = options.retryEveryMs ?? RETRY_EVERY_MS
    // A slot given back on another replica serves the longest waiting here at once, as one given back here does.
    slots.onFreedElsewhere?.((tool) => { if (this.queued(tool) > 0) void this.#serve(tool) })
  }

  /** How many runs of the tool wait here now. */
  queued(tool: string): number {
    return this.#waiting.get(tool)?.length ?? 0
  }

  /** A slot of the tool, now or once one frees up within `waitMs`; a refusal otherwise. */
  async acquire(tool: string, request: QueueRequest): Promise<QueueAnswer> {
    if (request.stop.stopped) return { refused: 'stopped' }
    if (this.queued(tool) === 0) {
      const lease = await this.#slots.acquire(tool)
      if (lease !== null) return { lease: this.#returning(tool, lease) }
    }
    if (request.waitMs <= 0) return { refused: 'full' }
    const waiting = this.#queueOf(tool)
    if (waiting.length >= (this.#maxQueued.get(tool) ?? 0)) return { refused: 'queue_full' }
    // Stopped while the limiter answered: an abort listener added now would never be called.
    if (stopped(request.stop)) return { refused: 'stopped' }
    return this.#wait(tool, waiting, request)
  }

  #queueOf(tool: string): Waiter[] {
    let waiting = this.#waiting.get(tool)
    if (waiting === undefined) {
      waiting = []
      this.#waiting.set(tool, waiting)
    }
    return waiting
  }

  #wait(tool: string, waiting: Waiter[], { waitMs, stop, onPosition }: QueueRequest): Promise<QueueAnswer> {
    const { signal } = stop
    return new Promise((resolve) => {
      const waiter: Waiter = {
        onPosition,
        settle: (answer) => {
          clearTimeout(timer)
          signal.removeEventListener('abort', left)
          resolve(answer)
        }
      }
      const leave = (refusal: QueueRefusal): void => {
        const index = waiting.indexOf(waiter)
        if (index === -1) return
        waiting.splice(index, 1)
        this.#onQueued?.(tool, waiting.length)
        this.#tellPositions(waiting, index)
        waiter.settle({ refused: refusal })
      }
      const timer = setTimeout(() => { leave('timed_out') }, waitMs)
      const left = (): void => { leave('stopped') }
      signal.addEventListener('abort', left, { once: true })
      waiting.push(waiter)
      this.#onQueued?.(tool, waiting.length)
      onPosition?.(waiting.length)
      this.#keepRetrying()
      // A slot may have freed up between the first try and now.
      void this.#serve(tool)
    })
  }

  /** Gives each free slot to the longest waiting, until none is free or nobody waits. */
  async #serve(tool: string): Promise<void> {
    if (this.#serving.has(tool)) {
      this.#askAgain.add(tool)
      return
    }
    this.#serving.add(tool)
    try {
      const waiting = this.#waiting.get(tool) ?? []
      while (waiting.length > 0) {
        this.#askAgain.delete(tool)
        const lease = await this.#slots.acquire(tool).catch(() => null)
        if (lease === null && this.#askAgain.has(tool)) continue
        if (lease === null) break
        const next = waiting.shift()
        if (next === undefined) {
          lease.release()
          break
        }
        this.#onQueued?.(tool, waiting.length)
        this.#tellPositions(waiting, 0)
        next.settle({ lease: this.#returning(tool, lease) })
      }
    } finally {
      this.#serving.delete(tool)
      this.#askAgain.delete(tool)
    }
  }

  /** Everyone from `from` on moved up one place. */
  #tellPositions(waiting: readonly Waiter[], from: number): void {
    for (let i = from; i < waiting.length; i++) waiting[i]!.onPosition?.(i + 1)
  }

  /** The slot given back serves the longest waiting at once. */
  #returning(tool: string, lease: SlotLease): SlotLease {
    return {
      holder: lease.holder,
      release: () => {
        lease.release()
        if (this.queued(tool) > 0) void this.#serve(tool)
      },
      // Still held, by its adopter: nothing frees up here.
      handOff: () => { lease.handOff() }
    }
  }

  #keepRetrying(): void {
    if (this.#retry !== undefined) return
    this.#retry = setInterval(() => {
      const tools = [...this.#waiting].filter(([, waiting]) => waiting.length > 0).map(([tool]) => tool)
      if (tools.length === 0) {
        clearInterval(this.#retry)
        this.#retry = undefined
      }
      for (const tool of tools) void this.#serve(tool)
    }, this.#retryEveryMs).unref()
  }
}

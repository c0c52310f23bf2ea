import type { RunEvent } from '../streams/events.js'

type OutputEvent = Extract<RunEvent, { type: 'output' }>
type ResultEvent = Extract<RunEvent, { type: 'result' }>
type Stored<E> = E & { id: number }
type StoredOutput = Stored<OutputEvent> & { end: number }

/**
 * The events of one async run, kept for followers who arrive late or reconnect (Last-Event-ID). Output is kept within
 * the per-run limit the way the result's output is: the first half and the latest half, so memory stays bounded
 * however much the agent writes; a follower asking for what was dropped gets a `gap` event instead.
 */
export class RunEventLog {
  readonly #headLimit: number
  readonly #tailLimit: number
  readonly #head: StoredOutput[] = []
  #headBytes = 0
  #tail: StoredOutput[] = []
  #tailStart = 0
  #tailBytes = 0
  #result: Stored<ResultEvent> | undefined
  #closed = false
  #nextId = 1
  readonly #listeners = new Set<() => void>()

  constructor(limitBytes: number) {
    this.#headLimit = Math.ceil(limitBytes / 2)
    this.#tailLimit = Math.floor(limitBytes / 2)
  }

  /** No event will follow: the run has ended (normally with a result event). */
  get ended(): boolean {
    return this.#closed
  }

  appendOutput(event: OutputEvent, rawBytes: number): void {
    const stored = { ...event, id: this.#nextId++, end: event.offset + rawBytes }
    if (this.#headBytes < this.#headLimit) {
      this.#head.push(stored)
      this.#headBytes += rawBytes
    } else {
      this.#tail.push(stored)
      this.#tailBytes += rawBytes
      this.#evictTail()
    }
    this.#notify()
  }

  /** The last event; null when the run failed without a result (followers are released all the same). */
  end(result: ResultEvent['result'] | null): void {
    if (result !== null) this.#result = { type: 'result', id: this.#nextId++, result }
    this.#closed = true
    this.#notify()
  }

  /** Everything kept after event `lastId`, in order, with a gap event where dropped output falls in between. */
  since(lastId: number): RunEvent[] {
    const tail = this.#tail.slice(firstIndexAfter(this.#tail, this.#tailStart, lastId))
    const head = this.#head.slice(firstIndexAfter(this.#head, 0, lastId))
    const events: RunEvent[] = head.map(publicEvent)
    const firstTail = tail[0]
    const lastHead = this.#head.at(-1)
    if (firstTail !== undefined && firstTail.id > Math.max(lastId, lastHead?.id ?? 0) + 1) {
      events.push({ type: 'gap', omitted_bytes: firstTail.offset - Math.max(lastHead?.end ?? 0, 0) })
    }
    events.push(...tail.map(publicEvent))
    if (this.#result !== undefined && this.#result.id > lastId) events.push(this.#result)
    return events
  }

  /** Called after every new event, until unsubscribed. */
  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  #notify(): void {
    for (const listener of this.#listeners) listener()
  }

  #evictTail(): void {
    while (this.#tail.length - this.#tailStart > 1 && this.#tailBytes > this.#tailLimit) {
      const dropped = this.#tail[this.#tailStart++]!
      this.#tailBytes -= dropped.end - dropped.offset
    }
    // Compact now and then, so dropped events do not pile up in the array.
    if (this.#tailStart > 1024 && this.#tailStart * 2 > this.#tail.length) {
      this.#tail = this.#tail.slice(this.#tailStart)
      this.#tailStart = 0
    }
  }
}

/** The index of the first event after `lastId` (ids only grow, so a binary search). */
function firstIndexAfter(events: StoredOutput[], from: number, lastId: number): number {
  let low = from
  let high = events.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (events[middle]!.id > lastId) high = middle
    else low = middle + 1
  }
  return low
}

function publicEvent({ end: _end, ...event }: StoredOutput): RunEvent {
  return event
}

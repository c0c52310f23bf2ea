import { formatEvent, type RunEvent } from '../streams/events.js'

type OutputEvent = Extract<RunEvent, { type: 'output' }>
type ResultEvent = Extract<RunEvent, { type: 'result' }>
/** What a follower is sent: an event's SSE frame, with its id and where its output ends (none for a gap). */
export interface LoggedFrame {
  frame: Buffer
  id?: number
  end?: number
}

/** An output event as followers receive it: its SSE frame, encoded once, and where its bytes lie in the output. */
interface StoredOutput {
  id: number
  offset: number
  end: number
  frame: Buffer
}

const encode = (event: RunEvent): Buffer => Buffer.from(formatEvent('sse', event))

/**
 * The events of one async run, kept for followers who arrive late or reconnect (Last-Event-ID). Each event is encoded
 * once, as the bytes of its SSE frame, and the same bytes go to every follower. Output is kept within the per-run
 * limit the way the result's output is: the first half and the latest half, so memory stays bounded however much the
 * agent writes; a follower asking for what was dropped gets a `gap` event with the exact count instead.
 */
export class RunEventLog {
  readonly #headLimit: number
  readonly #tailLimit: number
  readonly #head: StoredOutput[] = []
  #headBytes = 0
  #tail: StoredOutput[] = []
  #tailStart = 0
  #tailBytes = 0
  #result: { id: number; frame: Buffer } | undefined
  #encoded = 0
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

  /** How many events were encoded: one per event, whatever the number of followers. */
  get encodedEvents(): number {
    return this.#encoded
  }

  appendOutput(event: OutputEvent, rawBytes: number): void {
    const id = this.#nextId++
    this.#encoded++
    const stored = { id, offset: event.offset, end: event.offset + rawBytes, frame: encode({ ...event, id }) }
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
    if (result !== null) {
      const id = this.#nextId++
      this.#encoded++
      this.#result = { id, frame: encode({ type: 'result', id, result }) }
    }
    this.#closed = true
    this.#notify()
  }

  /**
   * Everything kept after event `lastId`, in order, with a gap where dropped output falls in between. `receivedEnd` is
   * where the output this follower already has ends, when it knows (a live follower does; one resuming from
   * Last-Event-ID is told by the log while the event is still kept, else from the head's end): the gap counts exactly
   * the bytes it never got.
   */
  since(lastId: number, receivedEnd = this.#endOf(lastId)): LoggedFrame[] {
    const tail = this.#tail.slice(firstIndexAfter(this.#tail, this.#tailStart, lastId))
    const head = this.#head.slice(firstIndexAfter(this.#head, 0, lastId))
    const frames: LoggedFrame[] = [...head]
    const firstTail = tail[0]
    const lastHead = this.#head.at(-1)
    if (firstTail !== undefined && firstTail.id > Math.max(lastId, lastHead?.id ?? 0) + 1) {
      const resumedAt = Math.max(lastHead?.end ?? 0, receivedEnd)
      frames.push({ frame: encode({ type: 'gap', omitted_bytes: firstTail.offset - resumedAt }) })
    }
    frames.push(...tail)
    if (this.#result !== undefined && this.#result.id > lastId) frames.push(this.#result)
    return frames
  }

  /** Where the output up to event `id` ends, while the log still holds that event (0 when it no longer does). */
  #endOf(id: number): number {
    for (const events of [this.#head, this.#tail]) {
      const found = events[firstIndexAfter(events, events === this.#tail ? this.#tailStart : 0, id) - 1]
      if (found !== undefined && found.id === id) return found.end
    }
    return 0
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
    // Compact once the dropped events are as many as the kept ones: they never hold more than the tail itself does.
    if (this.#tailStart * 2 > this.#tail.length) {
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

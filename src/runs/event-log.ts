import type { RunEvent } from '../schemas/events.js'
import type { Step } from '../schemas/steps.js'
import { formatEvent } from './events.js'
import type { OutputEvent } from './output-events.js'

/**
 * Steps read after the same output byte sort between that byte and the next, as fractions of it: a power of two, so
 * every id stays an exact number that stores index as they do byte offsets. Beyond this many steps at one byte (a CLI
 * writing thousands of events without a byte of output between them), the log keeps no more of them.
 */
const STEPS_PER_BYTE = 4096

/**
 * A kept event as followers receive it: its SSE frame, encoded once, and the range of the agent's output it carries
 * (`offset` to `end`; for a step, the output before it; for the result, both are the output's total). Ids only grow:
 * an output event's id is its `end`; a step's, the output before it plus its rank among the steps there, over 4096.
 */
export interface StoredEvent {
  id: number
  offset: number
  end: number
  frame: Buffer
}

export const encodeEvent = (event: RunEvent): Buffer => Buffer.from(formatEvent('sse', event))

/** The ids this log gives, as the Last-Event-ID header's schema checks them. */
export const EVENT_ID_PATTERN = '^([0-9]{1,15})(?:\\.([0-9]{1,4}))?$'

/**
 * What a Last-Event-ID names: an output's end (`1234`), a step (`1234.2`, its rank after byte 1234) or the result.
 * undefined: not an id this service gives.
 */
export function parseEventId(text: string): number | undefined {
  const match = new RegExp(EVENT_ID_PATTERN).exec(text)
  if (match === null) return undefined
  return Number(match[1]) + Math.min(Number(match[2] ?? 0), STEPS_PER_BYTE - 1) / STEPS_PER_BYTE
}

/**
 * The events of one async run while it runs, for followers who arrive late or reconnect (Last-Event-ID). Each event is
 * encoded once, as the bytes of its SSE frame, and the same bytes go to every follower. Frames are kept within the
 * per-run limit the way the result's output is: the first half and the latest half, so memory (and a store's rows)
 * stays bounded however much the agent writes, however it splits its writes; what was dropped in between shows to a
 * follower as a gap (see `withGaps`).
 */
export class RunEventLog {
  readonly #headLimit: number
  readonly #tailLimit: number
  readonly #head: StoredEvent[] = []
  #headBytes = 0
  #tail: StoredEvent[] = []
  #tailStart = 0
  #tailBytes = 0
  #result: StoredEvent | undefined
  #evicted = false
  /** The end of the last output event, and how many steps came after it. */
  #position = 0
  #stepsHere = 0
  #encoded = 0
  #closed = false
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

  appendOutput(event: OutputEvent): void {
    const end = event.id!
    this.#position = end
    this.#stepsHere = 0
    this.#keep({ id: end, offset: event.offset, end, frame: encodeEvent(event) })
  }

  appendStep(step: Step): void {
    if (this.#stepsHere === STEPS_PER_BYTE - 1) return
    const rank = ++this.#stepsHere
    const position = this.#position
    const frame = encodeEvent({ type: 'step', id: `${position}.${rank}`, step })
    this.#keep({ id: position + rank / STEPS_PER_BYTE, offset: position, end: position, frame })
  }

  #keep(stored: StoredEvent): void {
    this.#encoded++
    // Counted as what is kept, its frame: a one-byte write costs a frame of sixty, and JSON escapes grow text sixfold.
    const bytes = stored.frame.length
    if (this.#headBytes < this.#headLimit) {
      this.#head.push(stored)
      this.#headBytes += bytes
    } else {
      this.#tail.push(stored)
      this.#tailBytes += bytes
      this.#evictTail()
    }
    this.#notify()
  }

  /** The run's closing events (OutputEvents.closing): no event follows them; followers are released. */
  close(closing: RunEvent[]): void {
    for (const event of closing) {
      if (event.type === 'output') this.appendOutput(event)
      else if (event.type === 'result') {
        this.#encoded++
        const end = event.id! - 1
        this.#result = { id: event.id!, offset: end, end, frame: encodeEvent(event) }
      }
    }
    this.#closed = true
    this.#notify()
  }

  /** Every kept event after event `lastId`, in order: the head, the tail, the result. */
  after(lastId: number): StoredEvent[] {
    const events = [
      ...this.#head.slice(firstIndexAfter(this.#head, 0, lastId)),
      ...this.#tail.slice(firstIndexAfter(this.#tail, this.#tailStart, lastId))
    ]
    if (this.#result !== undefined && this.#result.id > lastId) events.push(this.#result)
    return events
  }

  /** The ids the tail has dropped lie strictly between these two (a store drops them too); undefined: none dropped. */
  dropped(): { after: number; before: number } | undefined {
    const lastHead = this.#head.at(-1)
    const firstTail = this.#tail[this.#tailStart]
    if (!this.#evicted || lastHead === undefined || firstTail === undefined) return undefined
    return { after: lastHead.id, before: firstTail.id }
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
      this.#tailBytes -= dropped.frame.length
      this.#evicted = true
    }
    // Compact once the dropped events are as many as the kept ones: they never hold more than the tail itself does.
    if (this.#tailStart * 2 > this.#tail.length) {
      this.#tail = this.#tail.slice(this.#tailStart)
      this.#tailStart = 0
    }
  }
}

/**
 * What a follower is sent after `position` (the bytes of output it already has): each event it chose, preceded by a
 * `gap` event wherever kept events skip output, counting exactly the bytes it will never get. An event it did not
 * choose is not sent, yet it has passed it: no gap is told for output it chose not to have.
 */
export function withGaps(
  events: StoredEvent[],
  position: number,
  sent: (event: StoredEvent) => boolean = () => true
): { frames: Buffer[]; position: number } {
  const frames: Buffer[] = []
  for (const event of events) {
    if (event.offset > position) frames.push(encodeEvent({ type: 'gap', omitted_bytes: event.offset - position }))
    if (sent(event)) frames.push(event.frame)
    position = Math.max(position, event.end)
  }
  return { frames, position }
}

/** The index of the first event after `lastId` (ids only grow, so a binary search). */
function firstIndexAfter(events: StoredEvent[], from: number, lastId: number): number {
  let low = from
  let high = events.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (events[middle]!.id > lastId) high = middle
    else low = middle + 1
  }
  return low
}

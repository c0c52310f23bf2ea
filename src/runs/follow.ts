import { setTimeout as sleep } from 'node:timers/promises'
import type { EventsChoice } from '../schemas/run.js'
import { withGaps, type RunEventLog, type StoredEvent } from './event-log.js'
import type { RunRecord, RunStore } from './stores/run-store.js'

/** Events read from the store per page, so that a follower of a large run never holds it whole. */
const STORED_PAGE = 64

/**
 * A frame stream for one follower: batches of SSE frames after event `lastId` (0: from the start), of the kinds it
 * chose, pulled only as fast as the follower takes them.
 */
export type Feed = (lastId: number, choice: EventsChoice, signal: AbortSignal) => AsyncGenerator<Buffer[]>

/**
 * Whether a follower who chose `choice` is sent this event, read from its id alone (stores keep no more): a step's id
 * falls between two bytes, an output's is where its bytes end, the result's one past that.
 */
function chosen(event: StoredEvent, choice: EventsChoice): boolean {
  if (choice === 'both') return true
  const isStep = !Number.isInteger(event.id)
  const isOutput = !isStep && event.id === event.end
  return choice === 'steps' ? !isOutput : !isStep
}

/** Where a follower's events come from: what is there after an id, and a wait for more (true: no more will come). */
export interface EventSource {
  read(lastId: number): StoredEvent[] | Promise<StoredEvent[]>
  settle(signal: AbortSignal): Promise<boolean>
}

/** A follower's frames: each read's events, with a gap wherever kept events skip output it never received. */
export async function* follow(
  source: EventSource,
  lastId: number,
  choice: EventsChoice,
  signal: AbortSignal
): AsyncGenerator<Buffer[]> {
  // A step's id is the output before it, plus its rank: what the follower has is the whole bytes.
  let position = Math.floor(lastId)
  while (!signal.aborted) {
    const events = await source.read(lastId)
    if (events.length > 0) {
      const batch = withGaps(events, position, (event) => chosen(event, choice))
      position = batch.position
      lastId = events.at(-1)!.id
      if (batch.frames.length > 0) yield batch.frames
    } else if (await source.settle(signal)) return
  }
}

/** A run of this replica, in its live log: each new event as it comes. */
export function logSource(log: RunEventLog): EventSource {
  return {
    read: (lastId) => log.after(lastId),
    settle: async (signal) => log.ended || (await nextEvent(log, signal), false)
  }
}

/** A run in the store: a finished one page by page, one running elsewhere (fleet) as its replica saves it. */
export function storeSource(store: RunStore, record: Pick<RunRecord, 'id' | 'status'>, pollMs: number): EventSource {
  let ended = record.status !== 'running'
  return {
    read: (lastId) => store.events(record.id, lastId, STORED_PAGE),
    settle: async (signal) => {
      if (ended) return true
      // Once the end is seen, one more read: what was saved just before it.
      ended = (await store.get(record.id))?.status !== 'running'
      if (!ended) await sleep(pollMs, undefined, { signal }).catch(() => undefined)
      return false
    }
  }
}

function nextEvent(log: RunEventLog, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      unsubscribe()
      signal.removeEventListener('abort', done)
      resolve()
    }
    const unsubscribe = log.subscribe(done)
    signal.addEventListener('abort', done, { once: true })
  })
}

import { setTimeout as sleep } from 'node:timers/promises'
import { withGaps, type RunEventLog, type StoredEvent } from './event-log.js'
import type { RunRecord, RunStore } from './stores/run-store.js'

/** Events read from the store per page, so that a follower of a large run never holds it whole. */
const STORED_PAGE = 64

/** A frame stream for one follower: batches of SSE frames, pulled only as fast as the follower takes them. */
export type Feed = (lastId: number, signal: AbortSignal) => AsyncGenerator<Buffer[]>

/** Where a follower's events come from: what is there after an id, and a wait for more (true: no more will come). */
export interface EventSource {
  read(lastId: number): StoredEvent[] | Promise<StoredEvent[]>
  settle(signal: AbortSignal): Promise<boolean>
}

/** A follower's frames: each read's events, with a gap wherever kept events skip output it never received. */
export async function* follow(source: EventSource, lastId: number, signal: AbortSignal): AsyncGenerator<Buffer[]> {
  let position = lastId
  while (!signal.aborted) {
    const events = await source.read(lastId)
    if (events.length > 0) {
      const batch = withGaps(events, position)
      position = batch.position
      lastId = events.at(-1)!.id
      yield batch.frames
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
export function storeSource(store: RunStore, record: RunRecord, pollMs: number): EventSource {
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

// A worker's room for one tool, shared by the queues it takes that tool from (a Windows worker's host and WSL runs):
// each queue's BullMQ worker stops fetching at its own concurrency, blind to the other's runs. So while the room is
// full every taker is paused; a run one of them fetched anyway (a fetch already waiting when it paused, or two takers
// at the same instant for the last place) finds no room and is given back.

/** What the room needs of a BullMQ worker. */
export interface Taker {
  pause: (doNotWaitActive: boolean) => Promise<void>
  resume: () => Promise<void>
}

export class ToolRoom {
  readonly #most: number
  readonly #takers: readonly Taker[]
  #inside = 0
  #takersPaused = false

  constructor(most: number, takers: readonly Taker[]) {
    this.#most = most
    this.#takers = takers
  }

  /** Takes a place for a run, if there is one left; a run that got one gives it back with `leave`. */
  enter(): boolean {
    if (this.#inside >= this.#most) return false
    this.#inside++
    this.#fetchWhileRoom()
    return true
  }

  leave(): void {
    this.#inside--
    this.#fetchWhileRoom()
  }

  /** One taker stops fetching at its own concurrency, which is the room's: only several need telling. */
  #fetchWhileRoom(): void {
    const full = this.#inside >= this.#most
    if (this.#takers.length < 2 || full === this.#takersPaused) return
    this.#takersPaused = full
    // Both flip the worker's state before their first await: called in order, they take effect in order.
    for (const taker of this.#takers) void (full ? taker.pause(true) : taker.resume()).catch(() => undefined)
  }
}

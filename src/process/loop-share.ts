/**
 * Shares the event loop's turns among relays that encode every byte they read. A relay that has read its share
 * waits here; each turn lets at most `perTurn` of the waiting relays read again, first come first served. However many
 * agents flood at once, one turn encodes a bounded amount, so every other callback (a health check, a new request)
 * waits at most that long.
 */
export class LoopShare {
  readonly #perTurn: number
  readonly #waiting: Array<() => void> = []
  #scheduled = false

  constructor(perTurn: number) {
    this.#perTurn = perTurn
  }

  /** `resume` runs on a later turn of the loop, when this relay's share comes. */
  wait(resume: () => void): void {
    this.#waiting.push(resume)
    if (!this.#scheduled) this.#schedule()
  }

  #schedule(): void {
    this.#scheduled = true
    setImmediate(() => {
      for (const resume of this.#waiting.splice(0, this.#perTurn)) resume()
      this.#scheduled = false
      if (this.#waiting.length > 0) this.#schedule()
    })
  }
}

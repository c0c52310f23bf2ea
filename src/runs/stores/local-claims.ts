/**
 * Claims held in this process's memory, for a store only one service uses (memory, an SQLite file under its
 * DATA_DIR): they lapse with the service, or after their time for a holder that never released them.
 */
export class LocalClaims {
  readonly #held = new Map<string, { holder: string; until: number }>()

  /** false while another holder's claim on `key` has not lapsed. */
  claim(key: string, holder: string, ttlMs: number): boolean {
    const held = this.#held.get(key)
    if (held !== undefined && held.holder !== holder && held.until > Date.now()) return false
    this.#held.set(key, { holder, until: Date.now() + ttlMs })
    return true
  }

  /** Only the holder's own claim: one that lapsed and was taken since is the new holder's. */
  release(key: string, holder: string): void {
    if (this.#held.get(key)?.holder === holder) this.#held.delete(key)
  }

  releaseAny(key: string): void {
    this.#held.delete(key)
  }
}

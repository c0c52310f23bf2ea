/** Progress carries the agent's output as it comes, at most this often. */
export const PROGRESS_EVERY_MS = 250
/**
 * Progress is a live view, not the record (the result carries the output): what waits for the next notification keeps
 * at most its last this many bytes, and nothing is sent while the client has not taken the last ones in.
 */
export const PROGRESS_PENDING_BYTES = 64 * 1024

/**
 * The newest output and step lines not sent yet, at most PROGRESS_PENDING_BYTES of them (whole chunks are dropped from
 * the front, as bytes: nothing is decoded that will not be sent), and how many bytes were left out before them.
 */
export class PendingProgress {
  #chunks: Buffer[] = []
  #bytes = 0
  #skipped = 0

  push(chunk: Buffer): void {
    this.#chunks.push(chunk)
    this.#bytes += chunk.length
    while (this.#bytes - this.#chunks[0]!.length >= PROGRESS_PENDING_BYTES) {
      const dropped = this.#chunks.shift()!
      this.#bytes -= dropped.length
      this.#skipped += dropped.length
    }
  }

  get empty(): boolean {
    return this.#bytes === 0
  }

  take(): string {
    const text = Buffer.concat(this.#chunks).toString('utf8')
    const message = this.#skipped === 0 ? text : `…[${String(this.#skipped)} bytes of output not shown]…\n${text}`
    this.#chunks = []
    this.#bytes = 0
    this.#skipped = 0
    return message
  }
}

/**
 * Keeps the first and the last bytes of a stream in bounded memory: an agent may print gigabytes, and the beginning
 * (what it set out to do) and the end (how it finished) are what a reader needs.
 */
export class HeadTailBuffer {
  readonly #headLimit: number
  readonly #tailLimit: number
  readonly #head: Buffer[] = []
  #headBytes = 0
  /** A ring, allocated once the head is full, so memory never exceeds the limit whatever the chunk sizes. */
  #tail: Buffer | undefined
  #tailEnd = 0
  #totalBytes = 0

  constructor(limitBytes: number) {
    this.#headLimit = Math.ceil(limitBytes / 2)
    this.#tailLimit = Math.floor(limitBytes / 2)
  }

  get totalBytes(): number {
    return this.#totalBytes
  }

  get truncated(): boolean {
    return this.#totalBytes > this.#headLimit + this.#tailLimit
  }

  push(chunk: Buffer): void {
    this.#totalBytes += chunk.length
    const headRoom = this.#headLimit - this.#headBytes
    if (headRoom > 0) {
      const toHead = chunk.subarray(0, headRoom)
      this.#head.push(toHead)
      this.#headBytes += toHead.length
      chunk = chunk.subarray(toHead.length)
    }
    if (chunk.length > 0 && this.#tailLimit > 0) this.#pushTail(chunk)
  }

  #pushTail(chunk: Buffer): void {
    this.#tail ??= Buffer.alloc(this.#tailLimit)
    const kept = chunk.subarray(Math.max(0, chunk.length - this.#tailLimit))
    const firstPart = Math.min(kept.length, this.#tailLimit - this.#tailEnd)
    kept.copy(this.#tail, this.#tailEnd, 0, firstPart)
    kept.copy(this.#tail, 0, firstPart)
    this.#tailEnd = (this.#tailEnd + kept.length) % this.#tailLimit
  }

  #tailInOrder(): Buffer {
    if (this.#tail === undefined) return Buffer.alloc(0)
    const tailBytes = this.#totalBytes - this.#headBytes
    if (tailBytes < this.#tailLimit) return this.#tail.subarray(0, tailBytes)
    return Buffer.concat([this.#tail.subarray(this.#tailEnd), this.#tail.subarray(0, this.#tailEnd)])
  }

  /** The kept bytes as text; invalid UTF-8 becomes U+FFFD rather than breaking the JSON response. */
  toString(): string {
    const head = Buffer.concat(this.#head)
    const tail = this.#tailInOrder()
    if (!this.truncated) return Buffer.concat([head, tail]).toString('utf8')
    const omitted = this.#totalBytes - this.#headLimit - this.#tailLimit
    return `${head.toString('utf8')}\n[… ${omitted} bytes omitted by agent-runner …]\n${tail.toString('utf8')}`
  }
}

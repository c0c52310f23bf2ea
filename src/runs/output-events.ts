import type { RunEvent } from '../schemas/events.js'
import type { RunResult } from '../schemas/run.js'

export type OutputEvent = Extract<RunEvent, { type: 'output' }>
type ResultEvent = Extract<RunEvent, { type: 'result' }>

/**
 * How many leading bytes of `bytes` end on a character boundary: a UTF-8 sequence cut by the end of a chunk is held
 * back for the next one. Bytes that cannot start a complete sequence are left for the decoder to replace.
 */
export function completeUtf8Length(bytes: Buffer): number {
  for (let index = bytes.length - 1; index >= Math.max(0, bytes.length - 4); index--) {
    const byte = bytes[index]!
    if ((byte & 0xc0) === 0x80) continue
    const needed = byte >= 0xf0 && byte <= 0xf7 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1
    return index + needed > bytes.length && byte < 0xf8 ? index : bytes.length
  }
  return bytes.length
}

/**
 * Turns the agent's raw chunks into output events: text that never splits a UTF-8 character across two events, with
 * the exact range of raw bytes each event stands for. An event's id is where its bytes end, so whoever has read up to
 * an id knows exactly how many bytes it has, even once the log has dropped that event.
 */
export class OutputEvents {
  #pending = Buffer.alloc(0)
  #offset = 0

  /** The event for this chunk; null while the chunk holds only part of a character. */
  next(chunk: Buffer): OutputEvent | null {
    const bytes = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk])
    const complete = completeUtf8Length(bytes)
    this.#pending = complete === bytes.length ? Buffer.alloc(0) : Buffer.from(bytes.subarray(complete))
    return complete === 0 ? null : this.#event(bytes.subarray(0, complete))
  }

  /** A character the agent left unfinished, as U+FFFD; null when there is none. */
  end(): OutputEvent | null {
    if (this.#pending.length === 0) return null
    const event = this.#event(this.#pending)
    this.#pending = Buffer.alloc(0)
    return event
  }

  /**
   * The last events of every stream of a run, live or kept: a character the agent left unfinished, then the result
   * (none for a run that failed without one), its id one past the last output byte.
   */
  closing(result: RunResult | null): Array<OutputEvent | ResultEvent> {
    const unfinished = this.end()
    const events: Array<OutputEvent | ResultEvent> = unfinished === null ? [] : [unfinished]
    if (result !== null) events.push({ type: 'result', id: this.#offset + 1, result })
    return events
  }

  /** Every byte the agent wrote so far, the held-back ones included. */
  get totalBytes(): number {
    return this.#offset + this.#pending.length
  }

  #event(bytes: Buffer): OutputEvent {
    const offset = this.#offset
    this.#offset += bytes.length
    return { type: 'output', id: this.#offset, offset, data: bytes.toString('utf8') }
  }
}

import { StringDecoder } from 'node:string_decoder'
import type { RunEvent } from './events.js'

/**
 * Turns the agent's raw chunks into output events: text that never splits a UTF-8 character across two events, and the
 * byte offset of each chunk in everything the agent wrote.
 */
export class OutputEvents {
  readonly #decoder = new StringDecoder('utf8')
  #offset = 0

  next(chunk: Buffer): Extract<RunEvent, { type: 'output' }> {
    const event = { type: 'output' as const, offset: this.#offset, data: this.#decoder.write(chunk) }
    this.#offset += chunk.length
    return event
  }

  /** A character the agent left unfinished, as U+FFFD; null when there is none. */
  end(): Extract<RunEvent, { type: 'output' }> | null {
    const rest = this.#decoder.end()
    return rest === '' ? null : { type: 'output', offset: this.#offset, data: rest }
  }
}

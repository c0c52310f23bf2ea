import type { StepParser } from '../agents/spec.js'
import type { Step } from '../schemas/steps.js'

/**
 * The longest line read as a step: past it (a whole file written by a tool, a command's whole output), the line is
 * skipped, never held. What a run's reader holds is bounded by this, whatever the agent writes.
 */
const STEP_LINE_MAX_BYTES = 1024 * 1024

/**
 * An agent's stdout, in chunks cut anywhere, read as JSON lines (text lines, for a parser that reads text) into steps:
 * the same steps however it is chunked. A line that is not JSON, too long, or one the parser chokes on is skipped and
 * counted, never a crash.
 */
export class StepReader {
  readonly #parser: StepParser
  #pending: Buffer[] = []
  #pendingBytes = 0
  #overlong = false
  /** Lines skipped: not JSON, over the size limit, or unreadable by the agent's parser. */
  skipped = 0

  constructor(parser: StepParser) {
    this.#parser = parser
  }

  push(chunk: Buffer): Step[] {
    const steps: Step[] = []
    let start = 0
    for (let newline = chunk.indexOf(0x0a); newline !== -1; newline = chunk.indexOf(0x0a, start)) {
      // A line whole in this chunk is read where it lies: no copy (a flood of short lines is mostly these).
      const lineSteps = this.#pendingBytes === 0 && !this.#overlong
        ? this.#read(chunk.toString('utf8', start, newline))
        : (this.#hold(chunk.subarray(start, newline)), this.#line())
      for (const step of lineSteps) steps.push(step)
      start = newline + 1
    }
    this.#hold(chunk.subarray(start))
    return steps
  }

  /** The last line (the output may end without a newline), then what the parser still held. */
  end(): Step[] {
    return [...this.#line(), ...(this.#parser.end?.() ?? [])]
  }

  #hold(bytes: Buffer): void {
    if (this.#overlong || bytes.length === 0) return
    if (this.#pendingBytes + bytes.length > STEP_LINE_MAX_BYTES) {
      this.#overlong = true
      this.#pending = []
      this.#pendingBytes = 0
      return
    }
    // A copy: the chunk it came from is not kept alive for a few bytes of it.
    this.#pending.push(Buffer.from(bytes))
    this.#pendingBytes += bytes.length
  }

  #line(): Step[] {
    const overlong = this.#overlong
    const text = Buffer.concat(this.#pending).toString('utf8')
    this.#pending = []
    this.#pendingBytes = 0
    this.#overlong = false
    if (!overlong) return this.#read(text)
    this.skipped++
    return []
  }

  #read(line: string): Step[] {
    if (this.#parser.readsText === true) return this.#parser.read(line)
    // Blanks around a value (a BOM, a CR before the newline) are no part of it; a blank line is no line.
    const text = line.length > 0 && isBlank(line.charCodeAt(0)) ? line.trim() : line
    if (text.length === 0) return []
    try {
      return this.#parser.read(JSON.parse(text))
    } catch {
      this.skipped++
      return []
    }
  }
}

/** Whether a line starting with this may start with blanks (JSON's whitespace, a BOM, Unicode spaces). */
const isBlank = (code: number): boolean => code <= 0x20 || code === 0xa0 || code === 0xfeff || code >= 0x2000

import type { Step } from '../../schemas/steps.js'

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

const callState = (status: string, exitCode?: number | null): string =>
  status === 'running' ? '' : exitCode === undefined || exitCode === null ? ` (${status})` : ` (exit ${exitCode})`

/**
 * A step as one line of progress text, for the people an MCP host shows progress to: what runs, what changed, what
 * failed. A call's start and end are two lines, so a long command shows while it runs.
 */
export function stepLine(step: Step): string {
  switch (step.kind) {
    case 'message':
      return step.text
    case 'command':
      return `$ ${step.command}${callState(step.status, step.exit_code)}`
    case 'file_change':
      return `${step.change ?? 'changing'} ${step.path}${callState(step.status)}`
    case 'tool':
      return `${step.name} ${step.input}${callState(step.status)}`
    case 'error':
      return `error: ${step.message}`
    case 'usage':
      return `tokens: ${String(step.input_tokens ?? '?')} in, ${String(step.output_tokens ?? '?')} out` +
        (step.cost_usd === null ? '' : `, $${step.cost_usd}`)
  }
}

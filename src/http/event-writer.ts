import type { ServerResponse } from 'node:http'
import type { RunEvent } from '../schemas/events.js'
import { formatEvent, type StreamFormat } from '../runs/events.js'
import { streamHeaders } from './stream-format.js'

/**
 * Writes run events to one HTTP response, and a heartbeat whenever the agent has been quiet for a while, so that
 * proxies do not cut a silent connection and the client can tell a quiet agent from a dead link.
 */
export class EventWriter {
  readonly #raw: ServerResponse
  readonly #format: StreamFormat
  readonly #heartbeatMs: number
  #heartbeat: NodeJS.Timeout | undefined

  constructor(raw: ServerResponse, format: StreamFormat, heartbeatMs: number) {
    this.#raw = raw
    this.#format = format
    this.#heartbeatMs = heartbeatMs
  }

  get closed(): boolean {
    return this.#raw.destroyed || this.#raw.writableEnded
  }

  open(headers: Record<string, string | number | string[] | undefined>): void {
    this.#raw.writeHead(200, { ...headers, ...streamHeaders(this.#format) })
    this.#raw.flushHeaders()
    this.#armHeartbeat()
  }

  /** false when the client is behind (wait for onDrain); a closed stream swallows events and never pushes back. */
  send(event: RunEvent): boolean {
    if (this.closed) return true
    this.#armHeartbeat()
    return this.#raw.write(formatEvent(this.#format, event))
  }

  /**
   * Events already encoded for this stream's format (shared by every follower of a run), written as one: a batch of a
   * hundred steps costs one socket write, not a hundred, for each of a run's followers. One buffer rather than corked
   * writes: corked, a follower of a flood on Node 22 waited for a 'drain' that never came (test/http/runs.test.ts).
   */
  sendFrames(frames: Buffer[]): boolean {
    if (this.closed) return true
    this.#armHeartbeat()
    return this.#raw.write(frames.length === 1 ? frames[0]! : Buffer.concat(frames))
  }

  /** The client has not taken what was written yet (a closed stream is never behind). */
  get behind(): boolean {
    return !this.closed && this.#raw.writableNeedDrain
  }

  /** `resume` runs once the client has taken what was written, or has gone. */
  onDrain(resume: () => void): void {
    void this.drained().then(resume)
  }

  /** Resolves once the client has taken what was written, or has gone. */
  drained(): Promise<void> {
    return new Promise((resolve) => {
      if (this.closed) return resolve()
      const done = (): void => {
        this.#raw.off('drain', done)
        this.#raw.off('close', done)
        resolve()
      }
      this.#raw.once('drain', done)
      this.#raw.once('close', done)
    })
  }

  close(): void {
    clearTimeout(this.#heartbeat)
    if (!this.closed) this.#raw.end()
  }

  #armHeartbeat(): void {
    clearTimeout(this.#heartbeat)
    this.#heartbeat = setTimeout(() => {
      if (this.closed) return
      this.#raw.write(formatEvent(this.#format, { type: 'heartbeat' }))
      this.#armHeartbeat()
    }, this.#heartbeatMs)
  }
}

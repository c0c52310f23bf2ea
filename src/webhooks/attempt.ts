import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import type { LookupFunction } from 'node:net'
import { performance } from 'node:perf_hooks'
import type { CheckedTarget } from './target.js'

/** A receiver has this long to answer with a 2xx, headers and all. */
const ATTEMPT_TIMEOUT_MS = 10_000
/** What is read of a receiver's answer before the connection is dropped: enough to log, never a memory cost. */
export const RESPONSE_READ_LIMIT_BYTES = 64 * 1024

/** How one attempt ended: delivered (2xx), gone (410: stop trying), or failed (retried). */
export type AttemptOutcome =
  | { kind: 'delivered'; status: number; durationMs: number }
  | { kind: 'gone'; status: 410; durationMs: number }
  | { kind: 'failed'; status: number | null; error: string | null; durationMs: number }

export interface WebhookRequest {
  target: CheckedTarget
  headers: Record<string, string>
  body: string
  timeoutMs?: number
}

/** Whatever the lookup asks (one address or all), the checked one: the socket never resolves the name again. */
const pinnedTo = ({ address, family }: CheckedTarget): LookupFunction =>
  (_host, options, callback) => {
    if ((options as { all?: boolean }).all === true) {
      (callback as (error: null, addresses: Array<{ address: string; family: number }>) => void)(
        null, [{ address, family }]
      )
    } else {
      callback(null, address, family)
    }
  }

/** Reads at most the limit of the answer, then lets the rest go with the connection. */
function drainBounded(response: IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    let read = 0
    const done = (): void => {
      response.destroy()
      resolve()
    }
    response.on('data', (chunk: Buffer) => {
      read += chunk.length
      if (read >= RESPONSE_READ_LIMIT_BYTES) done()
    })
    response.on('end', done)
    response.on('error', done)
    response.on('close', done)
  })
}

/**
 * One POST to the checked address: no redirect followed (a 3xx is a failure), no connection kept, the whole attempt
 * bounded in time (a receiver that never answers or trickles its headers costs one socket for that long) and what is
 * read of the answer bounded in size.
 */
export async function attemptDelivery({ target, headers, body, timeoutMs = ATTEMPT_TIMEOUT_MS }: WebhookRequest):
Promise<AttemptOutcome> {
  const started = performance.now()
  const elapsed = (): number => Math.round(performance.now() - started)
  const send = target.url.protocol === 'https:' ? httpsRequest : httpRequest
  const signal = AbortSignal.timeout(timeoutMs)
  return new Promise<AttemptOutcome>((resolve) => {
    const request = send(target.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers, 'content-length': String(Buffer.byteLength(body)) },
      lookup: pinnedTo(target),
      agent: false,
      signal
    })
    let answered = false
    request.on('response', (response) => {
      answered = true
      const status = response.statusCode ?? 0
      const durationMs = elapsed()
      const outcome: AttemptOutcome = status >= 200 && status < 300
        ? { kind: 'delivered', status, durationMs }
        : status === 410
          ? { kind: 'gone', status: 410, durationMs }
          : { kind: 'failed', status, error: null, durationMs }
      // Told once its connection is let go: a receiver trickling its answer holds its socket, and so its attempt's
      // place among those in flight, until then (the attempt's bound ends it).
      void drainBounded(response).then(() => { resolve(outcome) })
    })
    request.on('error', (error: NodeJS.ErrnoException) => {
      // Its answer came: the rest of it cut short (the attempt's bound) changes nothing of what it said.
      if (answered) return
      const reason = signal.aborted ? `no answer within ${String(timeoutMs)} ms` : (error.code ?? error.message)
      resolve({ kind: 'failed', status: null, error: reason, durationMs: elapsed() })
    })
    request.end(body)
  })
}

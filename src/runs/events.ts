import type { RunEvent } from '../schemas/events.js'

/** How a stream of run events is framed: one JSON line each, or server-sent events. */
export type StreamFormat = 'ndjson' | 'sse'

/** One event, framed: an async run's log keeps the SSE frame, encoded once for every follower. */
export function formatEvent(format: StreamFormat, event: RunEvent): string {
  const json = JSON.stringify(event)
  if (format === 'ndjson') return `${json}\n`
  const id = 'id' in event && event.id !== undefined ? `id: ${event.id}\n` : ''
  return `${id}event: ${event.type}\ndata: ${json}\n\n`
}

/** An SSE frame of this service's back into its event (an async run's log keeps frames, not objects). */
export function parseFrame(frame: Buffer): RunEvent {
  const text = frame.toString('utf8')
  const data = text.indexOf('data: ')
  return JSON.parse(text.slice(data + 'data: '.length, text.indexOf('\n', data))) as RunEvent
}

import type { StreamFormat } from '../runs/events.js'

const MEDIA_TYPES: Record<StreamFormat, string> = { ndjson: 'application/x-ndjson', sse: 'text/event-stream' }

/** The stream a client asked for in Accept, or null for the plain JSON answer. */
export function negotiateStream(accept: string | undefined): StreamFormat | null {
  if (accept === undefined) return null
  const types = accept.split(',').map((part) => part.split(';')[0]!.trim().toLowerCase())
  if (types.includes(MEDIA_TYPES.ndjson)) return 'ndjson'
  if (types.includes(MEDIA_TYPES.sse)) return 'sse'
  return null
}

export function streamHeaders(format: StreamFormat): Record<string, string> {
  return {
    'content-type': `${MEDIA_TYPES[format]}; charset=utf-8`,
    // Proxies and CDNs must pass each event on as it comes: no caching, no transformation, no buffering (nginx).
    'cache-control': 'no-cache, no-transform',
    'x-accel-buffering': 'no'
  }
}

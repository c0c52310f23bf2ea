/** The media types whose bodies are sequences of items, each described by OpenAPI 3.2's `itemSchema`. */
const SEQUENCES = ['application/x-ndjson', 'text/event-stream'] as const

type Json = Record<string, unknown>

/**
 * A 3.1 stream's media type in 3.2's words: the body is text, each item one RunEvent. An SSE item is an event whose
 * `data` holds the RunEvent as JSON (3.2's own form for SSE); an NDJSON item is the RunEvent itself.
 */
function sequenceOf(mediaType: string, items: unknown): Json {
  if (mediaType === 'application/x-ndjson') return { schema: { type: 'string' }, itemSchema: items }
  return {
    schema: { type: 'string' },
    itemSchema: {
      type: 'object',
      required: ['event', 'data'],
      properties: {
        event: { type: 'string', description: 'The RunEvent’s `type`.' },
        id: { type: 'string', description: 'Stored events only: for Last-Event-ID.' },
        data: { type: 'string', contentMediaType: 'application/json', contentSchema: items }
      }
    }
  }
}

const isRunEventStream = (media: unknown): media is { schema: unknown } =>
  JSON.stringify((media as { schema?: unknown } | undefined)?.schema) === '{"$ref":"#/components/schemas/RunEvent"}'

/**
 * The 3.1 document as OpenAPI 3.2 reads it (openapi-3.2.yaml): the same contract, whose streams say item by item what
 * they carry, for the tools that read 3.2. Pure: the 3.1 document is not touched.
 */
export function asOpenApi32(document: Json): Json {
  const copy = structuredClone(document) as Json & { paths: Record<string, Record<string, { responses?: Json }>> }
  for (const operations of Object.values(copy.paths)) {
    for (const operation of Object.values(operations)) {
      for (const response of Object.values(operation.responses ?? {}) as Array<{ content?: Json }>) {
        for (const mediaType of SEQUENCES) {
          const media = response.content?.[mediaType]
          if (isRunEventStream(media)) response.content![mediaType] = sequenceOf(mediaType, media.schema)
        }
      }
    }
  }
  return { ...copy, openapi: '3.2.0' }
}

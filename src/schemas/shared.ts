import { STATUS_CODES } from 'node:http'
import { ERROR_CODES, ErrorResponse, type ErrorStatus } from './error.js'
import { ref } from './ref.js'
import { RunEvent } from './events.js'
import { RunParams, RunResult } from './run.js'
import { runRequestSchema, RunState, RunSummary } from './runs.js'
import { Step } from './steps.js'
import { namingTools } from './tool-name.js'
import { WebhookEvent } from './webhook-event.js'
import { WebhookDeliveryState } from './webhooks.js'

/**
 * The schemas registered once with app.addSchema: routes point at them by $id, so validation, serialization and the
 * OpenAPI document share one definition, which @fastify/swagger names after the $id in components/schemas.
 */
export const sharedSchemas = (toolNames: readonly string[]) => [
  RunParams,
  namingTools(RunResult, toolNames),
  Step,
  RunEvent,
  runRequestSchema(toolNames),
  namingTools(RunSummary, toolNames),
  namingTools(RunState, toolNames),
  WebhookDeliveryState,
  WebhookEvent,
  ErrorResponse
] as const

interface ErrorResponseEntry {
  description: string
  content: {
    'application/json': {
      schema: ReturnType<typeof ref<typeof ErrorResponse>>
      examples: Record<string, { summary: string; value: ErrorResponse }>
    }
  }
}

/**
 * The response-map entries for error statuses: each a $ref to ErrorResponse, described by its codes and with one
 * example per code, so the document tells a client exactly which codes a status carries. The content-type form is the
 * one whose media-level examples @fastify/swagger carries into the document.
 */
export function errorResponses<S extends ErrorStatus>(statuses: readonly S[]): Record<S, ErrorResponseEntry> {
  const entries = {} as Record<S, ErrorResponseEntry>
  for (const status of statuses) {
    const codes: Record<string, readonly [string, string]> = ERROR_CODES[status]
    const description = Object.entries(codes)
      .map(([code, [when]]) => `- \`${code}\`: ${when}`)
      .join('\n')
    const examples = Object.fromEntries(
      Object.entries(codes).map(([code, [when, message]]) => [
        code,
        { summary: when, value: { statusCode: status, error: STATUS_CODES[status]!, code, message } }
      ])
    )
    entries[status] = { description, content: { 'application/json': { schema: ref(ErrorResponse), examples } } }
  }
  return entries
}

/**
 * A stream of RunEvents, typed as generated clients read one: OpenAPI 3.1 has no schema for a stream's items, and
 * clients (hey-api's SSE client, openapi-typescript) take a stream's schema as its items'. The 3.2 document
 * (openapi-3.2.yaml) says it in 3.2's words, `itemSchema`.
 */
export const STREAM_ITEMS = { schema: ref(RunEvent) }
const STREAMS_ARE =
  'As NDJSON (`Accept: application/x-ndjson`), one RunEvent per line; as SSE (`Accept: text/event-stream`), one ' +
  'frame per RunEvent: `event: <type>`, `data: <the RunEvent as JSON>`, and `id:` on stored events. The last event ' +
  'is the `result`. The schema of each stream is its items’.'

/**
 * A run's 200, as the client's Accept chose it: the result as JSON, or the run's events live as NDJSON or SSE.
 */
export function runResponse(description: string) {
  return {
    description: `${description} ${STREAMS_ARE}`,
    headers: {
      'x-run-id': {
        type: 'string',
        description:
          'The run’s id: what its webhook events carry as `data.id`; while it runs, GET and DELETE /runs/{id} ' +
          'reach it.'
      }
    },
    content: {
      'application/json': { schema: ref(RunResult) },
      'application/x-ndjson': STREAM_ITEMS,
      'text/event-stream': STREAM_ITEMS
    }
  }
}

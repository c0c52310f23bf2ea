import { Type } from '@sinclair/typebox'
import { STATUS_CODES } from 'node:http'
import { ERROR_CODES, ErrorResponse, type ErrorStatus } from './error.js'
import { ref } from './ref.js'
import { RunEvent } from './events.js'
import { RunParams, RunResult } from './run.js'
import { runRequestSchema, RunState, RunSummary } from './runs.js'
import { Step } from './steps.js'

/**
 * The schemas registered once with app.addSchema: routes point at them by $id, so validation, serialization and the
 * OpenAPI document share one definition, which @fastify/swagger names after the $id in components/schemas.
 */
export const sharedSchemas = (toolNames: readonly string[]) =>
  [RunParams, RunResult, Step, RunEvent, runRequestSchema(toolNames), RunSummary, RunState, ErrorResponse] as const

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
 * A run's 200, as the client's Accept chose it: the result as JSON, or the run's events live as NDJSON or SSE.
 */
export function runResponse(description: string) {
  return {
    description,
    content: {
      'application/json': { schema: ref(RunResult) },
      // A stream is a sequence of RunEvents, which OpenAPI 3.1 cannot type (3.2's itemSchema can): a string whose
      // lines are RunEvents, so validators (Prism) read the body as what it is, and the RunEvent schema names the
      // items.
      'application/x-ndjson': {
        schema: Type.String({
          description:
            'One RunEvent (components/schemas/RunEvent) as JSON per line, `\\n`-terminated; the last is `result`.'
        })
      },
      'text/event-stream': {
        schema: Type.String({
          description: 'SSE frames: `event: <type>`, `data: <RunEvent as JSON>`, and `id:` on stored events.'
        })
      }
    }
  }
}

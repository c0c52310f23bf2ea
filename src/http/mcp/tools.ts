import { Ajv } from 'ajv'
import type { TSchema } from '@sinclair/typebox'
import type { AgentTool } from '../../agents/tools.js'
import { formatValidationError } from '../error-handler.js'
import { RunParams, RunResult, type RunParams as RunParamsType } from '../../schemas/run.js'

/** A TypeBox schema as a plain JSON Schema for MCP hosts: without the $id this service registers it under. */
function plainJsonSchema(schema: TSchema): Record<string, unknown> {
  const { $id: _id, examples: _examples, ...plain } = JSON.parse(JSON.stringify(schema)) as Record<string, unknown>
  return plain
}

const inputSchema = plainJsonSchema(RunParams)
const outputSchema = plainJsonSchema(RunResult)
// The REST route's validation, option for option (Fastify's: defaults filled in, nothing coerced, nothing dropped).
const validateParams = new Ajv({
  useDefaults: true, coerceTypes: false, removeAdditional: false, allErrors: false, strict: false
}).compile(inputSchema)

/** One MCP tool per agent, with the REST body as its input and the REST result as its structured output. */
export function mcpToolOf(tool: AgentTool) {
  return {
    name: tool.name,
    title: tool.spec.summary,
    description: tool.spec.description,
    inputSchema,
    outputSchema,
    // Runs an agent that changes files and reaches the network: neither read-only nor idempotent, and open-world.
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true }
  }
}

/**
 * A tool call's arguments as a run's parameters (defaults filled in), or the REST route's message for what is
 * wrong.
 */
export function paramsOf(args: Record<string, unknown> | undefined): RunParamsType | string {
  const params = { ...args }
  if (validateParams(params)) return params as RunParamsType
  return formatValidationError(validateParams.errors ?? [], 'body').message
}

import { Ajv } from 'ajv'
import type { TSchema } from '@sinclair/typebox'
import type { AgentTool } from '../../agents/tools.js'
import type { ServiceError } from '../../errors.js'
import { formatValidationError } from '../error-handler.js'
import { ErrorResponse } from '../../schemas/error.js'
import { forCallers } from '../../schemas/for-callers.js'
import { RunParams, RunResult, type RunParams as RunParamsType } from '../../schemas/run.js'
import { namingTools } from '../../schemas/tool-name.js'

/** A TypeBox schema as a plain JSON Schema for MCP hosts: without the $id this service registers it under. */
function plainJsonSchema(schema: TSchema): Record<string, unknown> {
  const { $id: _id, examples: _examples, ...plain } = JSON.parse(JSON.stringify(schema)) as Record<string, unknown>
  return plain
}

const runParams = plainJsonSchema(RunParams)
// The REST route's validation, option for option (Fastify's: defaults filled in, nothing coerced, nothing dropped).
const validateParams = new Ajv({
  useDefaults: true, coerceTypes: false, removeAdditional: false, allErrors: false, strict: false
}).compile(runParams)

/**
 * One MCP tool per agent, described as the OpenAPI document describes POST /tools/{tool}: the caller-facing body
 * (JSON Schema 2020-12, MCP's default dialect) as input, and as output the result or, for a refused call, the REST
 * error object (MCP requires structured content to match the output schema, errors included).
 */
export function mcpToolsOf(tools: readonly AgentTool[]) {
  const inputSchema = forCallers(runParams)
  const outputSchema = {
    type: 'object',
    anyOf: [plainJsonSchema(namingTools(RunResult, tools.map((tool) => tool.name))), plainJsonSchema(ErrorResponse)]
  }
  return tools.map((tool) => ({
    name: tool.name,
    title: tool.spec.summary,
    description: tool.spec.description,
    inputSchema,
    outputSchema,
    // Runs an agent that changes files and reaches the network: neither read-only nor idempotent, and open-world.
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true }
  }))
}

/**
 * A tool call's arguments as a run's parameters (defaults filled in), or the REST route's refusal of them.
 */
export function paramsOf(args: Record<string, unknown> | undefined): RunParamsType | ServiceError {
  const params = { ...args }
  if (validateParams(params)) return params as RunParamsType
  return formatValidationError(validateParams.errors ?? [], 'body')
}

import type { AgentTool } from '../../agents/tools.js'
import { ErrorResponse } from '../../schemas/error.js'
import { forCallers } from '../../schemas/for-callers.js'
import { RunParams, RunResult } from '../../schemas/run.js'
import { namingTools } from '../../schemas/tool-name.js'
import { plainJsonSchema } from '../plain-json-schema.js'

const runParams = plainJsonSchema(RunParams)

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

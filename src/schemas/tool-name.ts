import { Type, type TObject } from '@sinclair/typebox'

/** One of the tools this service runs: the catalog's agents and any configured, known only when the app is built. */
export const ToolName = (toolNames: readonly string[], description?: string) =>
  Type.Union(toolNames.map((name) => Type.Literal(name)), description === undefined ? {} : { description })

/**
 * A shared schema whose `tool` names one of this service's tools rather than any string: a generated client then
 * types a result's tool as the request's.
 */
export function namingTools<S extends TObject>(schema: S, toolNames: readonly string[]): S {
  return { ...schema, properties: { ...schema.properties, tool: ToolName(toolNames) } }
}

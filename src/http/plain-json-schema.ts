import type { TSchema } from '@sinclair/typebox'

/** A TypeBox schema as a plain JSON Schema (MCP hosts, Ajv alone): without the $id this service registers it under. */
export function plainJsonSchema(schema: TSchema): Record<string, unknown> {
  const { $id: _id, examples: _examples, ...plain } = JSON.parse(JSON.stringify(schema)) as Record<string, unknown>
  return plain
}

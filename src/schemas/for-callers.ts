/**
 * A shared schema says what the service validates; a caller must be told what to send. They differ twice:
 * - Fastify validates with Ajv's draft-07, which knows `dependencies`; OpenAPI 3.1 and MCP schemas are JSON Schema
 *   2020-12, which names the same rule `dependentRequired` (and ignores `dependencies`).
 * - A property with a default (`timeout`) is required by the schema only because Ajv fills it in before checking;
 *   a caller may omit it, and generated clients and MCP hosts must let it.
 */
export function forCallers<S extends Record<string, unknown>>(schema: S): S {
  const { dependencies, ...described } = schema as S & { dependencies?: unknown }
  if (dependencies !== undefined) Object.assign(described, { dependentRequired: dependencies })
  type Described = { required?: unknown, properties?: Record<string, { default?: unknown }> }
  const { required, properties } = described as Described
  // Object schemas only: a union (RunEvent) has neither list.
  if (Array.isArray(required) && properties !== undefined) {
    Object.assign(described, {
      required: required.filter((name: string) => properties[name]?.default === undefined)
    })
  }
  return described as S
}

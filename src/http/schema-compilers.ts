import ValidatorSelector from '@fastify/ajv-compiler'
import SerializerSelector from '@fastify/fast-json-stringify-compiler'
import type { FastifyServerOptions } from 'fastify'

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>

/** Compiles each distinct schema once, whatever the number of routes that use it. */
function memoized<Route extends { schema?: unknown }, Compiled>(
  compile: (route: Route) => Compiled,
  keyOf: (route: Route) => string
) {
  const compiled = new Map<string, Compiled>()
  return (route: Route): Compiled => {
    const key = keyOf(route)
    let found = compiled.get(key)
    if (found === undefined) {
      found = compile(route)
      compiled.set(key, found)
    }
    return found
  }
}

/**
 * Fastify's own compilers (Ajv, fast-json-stringify), each compiled function shared by every route whose schema is the
 * same: the agents' routes are one shape per agent, so compiling them per route made most of the service's start.
 */
export function sharedSchemaCompilers(): CompilersFactory {
  const buildValidator = ValidatorSelector()
  const buildSerializer = SerializerSelector()
  return {
    buildValidator: (externalSchemas, options) =>
      memoized(buildValidator(externalSchemas, options), (route) => JSON.stringify([route.httpPart, route.schema])),
    buildSerializer: (externalSchemas, options) =>
      memoized(buildSerializer(externalSchemas, options), (route) => JSON.stringify(route.schema))
  }
}

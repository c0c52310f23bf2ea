import { stringify } from 'yaml'
import { buildApp } from './app.js'
import { loadConfig } from '../config.js'
import { asOpenApi32 } from '../http/openapi-32.js'

/**
 * The OpenAPI documents as YAML, exactly as `openapi.yaml` (3.1) and `openapi-3.2.yaml` must hold them. Built from the
 * defaults alone (no environment, no .env) so that they are the same on every machine: a document must not depend on
 * where it was generated.
 */
export async function renderOpenApiYaml(): Promise<{ v31: string, v32: string }> {
  const app = await buildApp(loadConfig({ LOG_LEVEL: 'silent', RUNS_STORE: 'memory' }), { logger: false, agentEnv: {} })
  try {
    await app.ready()
    // Written by the same YAML library and options as @fastify/swagger's.
    return { v31: app.swagger({ yaml: true }), v32: stringify(asOpenApi32(app.swagger() as never), { strict: false }) }
  } finally {
    await app.close()
  }
}

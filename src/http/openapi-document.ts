import { buildApp } from './app.js'
import { loadConfig } from '../config.js'

/**
 * The OpenAPI document as YAML, exactly as `openapi.yaml` must hold it. Built from the defaults alone (no environment,
 * no .env) so that it is the same on every machine: the document must not depend on where it was generated.
 */
export async function renderOpenApiYaml(): Promise<string> {
  const app = await buildApp(loadConfig({ LOG_LEVEL: 'silent', RUNS_STORE: 'memory' }), { logger: false, agentEnv: {} })
  try {
    await app.ready()
    return app.swagger({ yaml: true })
  } finally {
    await app.close()
  }
}

import { Ajv } from 'ajv'
import type { ServiceError } from '../errors.js'
import { formatValidationError } from './error-handler.js'
import { RunParams, type RunParams as RunParamsType } from '../schemas/run.js'
import { plainJsonSchema } from './plain-json-schema.js'

// The REST route's validation, option for option (Fastify's: defaults filled in, nothing coerced, nothing dropped).
const validateParams = new Ajv({
  useDefaults: true, coerceTypes: false, removeAdditional: false, allErrors: false, strict: false
}).compile(plainJsonSchema(RunParams))

/**
 * Arguments that came another way than a REST body (an MCP tool call's, an A2A message's metadata) as a run's
 * parameters (defaults filled in), or the REST route's refusal of them.
 */
export function paramsOf(args: Record<string, unknown> | undefined): RunParamsType | ServiceError {
  const params = { ...args }
  if (validateParams(params)) return params as RunParamsType
  return formatValidationError(validateParams.errors ?? [], 'body')
}

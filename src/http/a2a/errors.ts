import {
  A2AError, ContentTypeNotSupportedError, RequestMalformedError, TaskNotFoundError, type A2AErrorInfo
} from '@a2a-js/sdk/errors'
import type { FastifyBaseLogger } from 'fastify'
import { serviceError, ServiceError } from '../../errors.js'
import { toErrorResponse } from '../error-handler.js'

/** Where the service's own reasons are defined (ErrorInfo's `domain`): A2A's are `a2a-protocol.org`. */
export const SERVICE_ERROR_DOMAIN = 'agent-runner'

/**
 * A refusal A2A has no error for (a full tool, a token's budget spent, the service shutting down): its reason is the
 * service's code, in the service's domain, so that a client tells "not now" from "never" as a REST caller does.
 */
export class ServiceRefusalError extends A2AError {
  override readonly reason: string
  readonly httpStatus: number

  constructor(code: string, message: string, httpStatus: number) {
    super({ message, metadata: { code, status: String(httpStatus) } })
    this.reason = code
    this.httpStatus = httpStatus
  }

  override toErrorInfo(): A2AErrorInfo {
    // The SDK types the domain as A2A's own; ErrorInfo's is whoever defines the reason.
    return { ...super.toErrorInfo(), domain: SERVICE_ERROR_DOMAIN } as unknown as A2AErrorInfo
  }
}

/**
 * A refusal of the service as an A2A error carrying its `code` (ErrorInfo metadata): A2A's own error where one means
 * the same (an unknown run is an unknown task, a bad field a malformed request), the service's otherwise.
 */
export function a2aErrorOf(error: ServiceError): A2AError {
  const answer = toErrorResponse(error)
  const metadata = { code: answer.code, status: String(answer.statusCode) }
  const options = { message: answer.message, metadata }
  if (answer.statusCode === 404) return new TaskNotFoundError(options)
  if (answer.statusCode === 415) return new ContentTypeNotSupportedError(options)
  if (answer.statusCode === 400 || answer.statusCode === 413) return new RequestMalformedError(options)
  if (answer.code === 'INTERNAL_ERROR') return new A2AError(options)
  return new ServiceRefusalError(answer.code, answer.message, answer.statusCode)
}

/**
 * What a client is told of a failure: an A2A error as it is (a refusal, said on purpose); anything else (a bug, a store
 * gone) as A2A's internal error with no more than REST says of one, its details logged.
 */
export function answerable(error: unknown, log: FastifyBaseLogger): unknown {
  if (error instanceof A2AError) return error
  if (error instanceof ServiceError) return a2aErrorOf(error)
  log.error({ err: error }, 'A2A call failed')
  return a2aErrorOf(serviceError('INTERNAL_ERROR'))
}

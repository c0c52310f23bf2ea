import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify'
import { STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import { ERROR_CATALOG, serviceError, ServiceError, statusOf, type ErrorCode } from '../errors.js'
import type { ErrorResponse } from '../schemas/error.js'

/** Fastify's and Node's own refusals, renamed into the service's vocabulary: the catalog says which is which. */
const FOREIGN_CODES = new Map<string, ErrorCode>(
  (Object.keys(ERROR_CATALOG) as ErrorCode[]).flatMap((code) => {
    const entry = ERROR_CATALOG[code]
    return ('from' in entry ? entry.from : []).map((foreign): [string, ErrorCode] => [foreign, code])
  })
)

const isExposed = (code: ErrorCode): boolean => 'exposed' in ERROR_CATALOG[code]

function errorBody(statusCode: number, code: string, message: string): ErrorResponse {
  return { statusCode, error: STATUS_CODES[statusCode] ?? 'Error', code, message }
}

const answerFor = (error: ServiceError): ErrorResponse => errorBody(statusOf(error.code), error.code, error.message)

type ValidationIssue = NonNullable<FastifyError['validation']>[number]

/** Ajv says "must NOT have additional properties" without naming the property; a caller needs the name. */
function describeValidationIssue(context: string, issue: ValidationIssue): string {
  const path = `${context}${issue.instancePath}`
  if (issue.keyword === 'additionalProperties') {
    return `${path}/${String(issue.params['additionalProperty'])} is not an accepted field`
  }
  if (issue.keyword === 'required') {
    return `${path}/${String(issue.params['missingProperty'])} is required`
  }
  return `${path} ${issue.message ?? 'is invalid'}`
}

/** Fastify's schemaErrorFormatter: the message is written once, naming each field and why. */
export function formatValidationError(issues: ValidationIssue[], context: string): ServiceError {
  return serviceError('VALIDATION_ERROR', issues.map((issue) => describeValidationIssue(context, issue)).join('; '))
}

/** The one place an error becomes an answer: the catalog's status and code, and no detail of an unexpected failure. */
export function toErrorResponse(error: FastifyError | ServiceError): ErrorResponse {
  if (error instanceof ServiceError) {
    const hidden = statusOf(error.code) >= 500 && !isExposed(error.code)
    return hidden ? answerFor(serviceError('INTERNAL_ERROR')) : answerFor(error)
  }
  const renamed = FOREIGN_CODES.get(error.code)
  if (renamed !== undefined) return errorBody(statusOf(renamed), renamed, error.message)
  const statusCode = error.statusCode ?? 500
  if (statusCode >= 500) return answerFor(serviceError('INTERNAL_ERROR'))
  // A plugin's error may carry a statusCode and no code, whatever FastifyError's type says: @fastify/static's for a
  // path it will not serve (`/docs/static/....//x` 403, a NUL byte 400). It gets the catalog's code for what it is.
  const given = error.code as string | undefined
  if (given !== undefined) return errorBody(statusCode, given, error.message)
  const code = UNCODED_BY_STATUS.get(statusCode) ?? 'MALFORMED_REQUEST'
  return errorBody(statusOf(code), code, error.message)
}

/** What a refusal that came without a code means, by its status. */
const UNCODED_BY_STATUS = new Map<number, ErrorCode>([
  [400, 'BAD_URL'], [403, 'FORBIDDEN_PATH'], [404, 'ROUTE_NOT_FOUND']
])

/** Node's own refusals, before any route: a request that never arrived whole, or that no HTTP parser can read. */
function clientErrorAnswer(error: NodeJS.ErrnoException): ErrorResponse {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return answerFor(serviceError('REQUEST_TIMEOUT'))
  if (error.code === 'HPE_HEADER_OVERFLOW') return answerFor(serviceError('HEADERS_TOO_LARGE'))
  return answerFor(serviceError('MALFORMED_REQUEST', error.code ?? 'parse error'))
}

/** Fastify's clientErrorHandler: the same error shape as every other answer, then the connection ends. */
export function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  // A connection reset by the client, or one already answered: there is nobody to tell.
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy()
    return
  }
  const answer = clientErrorAnswer(error)
  const body = JSON.stringify(answer)
  socket.end(
    `HTTP/1.1 ${answer.statusCode} ${answer.error}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  )
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** On a run route: the tool a request asked for, so that a refusal is counted under it. */
    toolOfRequest?: (request: FastifyRequest) => string
  }
}

/** A refused run request, counted (metrics) under its tool and error code. */
export type RejectionObserver = (tool: string, code: string) => void

export function registerErrorHandlers(app: FastifyInstance, onRejection: RejectionObserver): void {
  app.setErrorHandler((error: FastifyError | ServiceError, request, reply) => {
    const body = toErrorResponse(error)
    if (body.statusCode >= 500) {
      request.log.error({ err: error }, 'request failed')
    }
    // Here rather than in an onError hook: one place sees every refusal, and the answer is built once.
    const toolOfRequest = request.routeOptions.config.toolOfRequest
    if (toolOfRequest !== undefined) onRejection(toolOfRequest(request), body.code)
    return reply.code(body.statusCode).send(body)
  })
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send(answerFor(serviceError('ROUTE_NOT_FOUND', request.method, request.url)))
  )
}

import createError from '@fastify/error'
import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify'
import { STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import type { ErrorResponse } from './schemas/error.js'

// Every error below is an answer to a caller, not a bug: none captures a stack trace, which would be most of its cost.
export const ValidationFailed = createError<'VALIDATION_ERROR', 400, [string]>('VALIDATION_ERROR', '%s', 400, Error, false)
const AgentLimitError = createError<'AGENT_LIMIT_REACHED', 429, [string]>('AGENT_LIMIT_REACHED', 'Limite de %s atteinte', 429, Error, false)
/** The seed's message, `Limite de N agents atteinte`, in French that agrees with N (`Limite de 1 agent atteinte`). */
export const agentLimitReached = (limit: number) => new AgentLimitError(`${limit} agent${limit > 1 ? 's' : ''}`)
export const CwdNotFound = createError<'CWD_NOT_FOUND', 400, [string]>('CWD_NOT_FOUND', 'body/cwd: %s does not exist', 400, Error, false)
export const CwdNotADirectory = createError<'CWD_NOT_A_DIRECTORY', 400, [string]>('CWD_NOT_A_DIRECTORY', 'body/cwd: %s is not a directory', 400, Error, false)
export const WslDistroNotFound = createError<'WSL_DISTRO_NOT_FOUND', 400, [string]>('WSL_DISTRO_NOT_FOUND', 'body/wsl_distro: there is no WSL distro named %s on this host (wsl --list)', 400, Error, false)
export const WslArgumentUnsafe = createError<'WSL_ARGUMENT_UNSAFE', 400, [string]>('WSL_ARGUMENT_UNSAFE', '%s', 400, Error, false)
export const CommandLineTooLong = createError<'COMMAND_LINE_TOO_LONG', 400, [number, number]>('COMMAND_LINE_TOO_LONG', 'body/task: the command line would be %s characters, over the %s Windows accepts (quotes and backslashes in the task count twice)', 400, Error, false)
export const HostNotAllowed = createError<'HOST_NOT_ALLOWED', 403, [string]>('HOST_NOT_ALLOWED', 'Host %s is not this service: without API_TOKENS only its own names are served (ALLOWED_HOSTS adds more)', 403, Error, false)
export const OriginNotAllowed = createError<'ORIGIN_NOT_ALLOWED', 403, [string]>('ORIGIN_NOT_ALLOWED', 'Origin %s may not call this service: without API_TOKENS only pages of its own names may (ALLOWED_HOSTS adds more)', 403, Error, false)
export const RunNotFound = createError<'RUN_NOT_FOUND', 404, [string]>('RUN_NOT_FOUND', 'No run %s here: unknown, expired, or started on another replica', 404, Error, false)
export const SlotsUnavailable = createError<'SLOTS_UNAVAILABLE', 503, [string]>('SLOTS_UNAVAILABLE', 'The shared agent slots cannot be reached (Redis): %s', 503, Error, false)
export const RunsUnavailable = createError<'RUNS_UNAVAILABLE', 503, [string]>('RUNS_UNAVAILABLE', 'The shared run store cannot be reached (Redis): %s', 503, Error, false)
export const AgentNotInstalled = createError<'AGENT_NOT_INSTALLED', 503, [string, string]>('AGENT_NOT_INSTALLED', 'The %s agent is not installed here: %s was not found on PATH', 503, Error, false)
export const ShuttingDown = createError<'SHUTTING_DOWN', 503, []>('SHUTTING_DOWN', 'The service is shutting down: the run was not started', 503, Error, false)
/** Answered to nobody (the connection is gone); 499 is the status proxies log for a client that closed its request. */
export const ClientClosedRequest = createError<'CLIENT_CLOSED_REQUEST', 499, []>('CLIENT_CLOSED_REQUEST', 'The client closed the request before its agent started', 499, Error, false)
export const AgentSpawnFailed = createError<'AGENT_SPAWN_FAILED', 503, [string, string]>('AGENT_SPAWN_FAILED', 'The %s agent could not be started: %s', 503, Error, false)

/** Server-side conditions a caller can act on (install the agent, retry later); every other 5xx stays opaque. */
const EXPOSED_SERVER_ERRORS = new Set(['AGENT_NOT_INSTALLED', 'AGENT_SPAWN_FAILED', 'SLOTS_UNAVAILABLE', 'RUNS_UNAVAILABLE', 'SHUTTING_DOWN'])

/** Fastify's own client errors, renamed into the service's vocabulary. */
const PUBLIC_CODES: Record<string, string> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'BODY_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_INVALID_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'INVALID_CONTENT_LENGTH',
  FST_ERR_BAD_URL: 'BAD_URL',
  FST_ERR_MAX_PARAM_LENGTH: 'URL_TOO_LONG',
  FST_STATIC_FORBIDDEN_PATH: 'FORBIDDEN_PATH',
  FST_BEARER_AUTH_MISSING_AUTHORIZATION_HEADER: 'UNAUTHORIZED',
  FST_BEARER_AUTH_INVALID_AUTHORIZATION_HEADER: 'UNAUTHORIZED'
}

export function errorBody(statusCode: number, code: string, message: string): ErrorResponse {
  return { statusCode, error: STATUS_CODES[statusCode] ?? 'Error', code, message }
}

type ValidationIssue = NonNullable<FastifyError['validation']>[number]

/** Ajv says "must NOT have additional properties" without naming the property; a caller needs the name. */
export function describeValidationIssue(context: string, issue: ValidationIssue): string {
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
export function formatValidationError(issues: ValidationIssue[], context: string): Error {
  return new ValidationFailed(issues.map((issue) => describeValidationIssue(context, issue)).join('; '))
}

export function toErrorResponse(error: FastifyError): ErrorResponse {
  const statusCode = error.statusCode ?? 500
  if (statusCode >= 500 && !EXPOSED_SERVER_ERRORS.has(error.code)) {
    return errorBody(500, 'INTERNAL_ERROR', 'Internal server error')
  }
  return errorBody(statusCode, PUBLIC_CODES[error.code] ?? error.code ?? 'BAD_REQUEST', error.message)
}

/** Node's own refusals, before any route: a request that never arrived whole, or that no HTTP parser can read. */
export function clientErrorAnswer(error: NodeJS.ErrnoException): ErrorResponse {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return errorBody(408, 'REQUEST_TIMEOUT', 'The request did not arrive in time (REQUEST_TIMEOUT_MS)')
  if (error.code === 'HPE_HEADER_OVERFLOW') return errorBody(431, 'HEADERS_TOO_LARGE', 'The request headers are over 16 KiB')
  return errorBody(400, 'MALFORMED_REQUEST', `The request is not valid HTTP/1.1 (${error.code ?? 'parse error'})`)
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
    runTool?: (request: FastifyRequest) => string
  }
}

/** A refused run request, counted (metrics) under its tool and error code. */
export type RejectionObserver = (tool: string, code: string) => void

export function registerErrorHandlers(app: FastifyInstance, onRejection: RejectionObserver): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const body = toErrorResponse(error)
    if (body.statusCode >= 500) {
      request.log.error({ err: error }, 'request failed')
    }
    // Here rather than in an onError hook: one place sees every refusal, and the answer is built once.
    const runTool = request.routeOptions.config.runTool
    if (runTool !== undefined) onRejection(runTool(request), body.code)
    return reply.code(body.statusCode).send(body)
  })
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send(errorBody(404, 'ROUTE_NOT_FOUND', `Route ${request.method} ${request.url} not found`))
  )
}

import type { FastifyInstance } from 'fastify'
import type { ErrorResponse, RunParams, RunRequest, RunResult, RunState, RunSummary } from '../generated/openapi.js'
import { until } from './processes.js'

// The API as tests call it, typed with the client types generated from openapi.yaml (test/generated/openapi.d.ts):
// a test reads what a client would, and a contract change that breaks a caller breaks `npm test` (its build:test).

export type { RunEvent } from '../generated/openapi.js'
export type ToolName = RunRequest['tool']
type Headers = Record<string, string>

interface Answer<Body> {
  status: number
  body: Body
  headers: Record<string, string | string[] | number | undefined>
}

/** Who answers: the app in this process (through inject) or a listening service (through fetch), the same calls. */
type Service = FastifyInstance | string

/**
 * One JSON request; the body is parsed whatever the status, and read as it comes (`any`): the calls below give it the
 * type the document promises for their status.
 */
export async function call(
  service: Service, method: string, url: string, options: { body?: unknown; headers?: Headers } = {}
): Promise<Answer<any>> {
  const { body, headers = {} } = options
  if (typeof service !== 'string') {
    const response = await service.inject({
      method: method as 'GET', url, headers, ...(body === undefined ? {} : { payload: body as object })
    })
    return { status: response.statusCode, body: response.json(), headers: response.headers }
  }
  const response = await fetch(`${service}${url}`, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body)
  })
  return { status: response.status, body: await response.json(), headers: Object.fromEntries(response.headers) }
}

/** Fails the test with what came back instead, when the status is not the one the call is for. */
function expectStatus(answer: Answer<any>, status: number, what: string): any {
  if (answer.status !== status) {
    throw new Error(`${what}: expected ${status}, got ${answer.status} ${JSON.stringify(answer.body)}`)
  }
  return answer.body
}

/** POST /tools/<tool> with any body: a result or a refusal, as the status says. */
export const post = async (
  service: Service, tool: string, body: unknown, headers?: Headers
): Promise<Answer<RunResult | ErrorResponse>> =>
  call(service, 'POST', `/tools/${tool}`, { body, headers })

/** A synchronous run that must be answered 200: its result. */
export async function runTool(
  service: Service, tool: ToolName, params: RunParams, headers?: Headers
): Promise<RunResult> {
  return expectStatus(await post(service, tool, params, headers), 200, `POST /tools/${tool}`)
}

/** A request that must be refused: its status and the error shape. */
export async function refused(
  service: Service, tool: string, body: unknown, headers?: Headers
): Promise<Answer<ErrorResponse>> {
  const answer = await post(service, tool, body, headers)
  if (answer.status < 400) {
    throw new Error(`POST /tools/${tool}: expected a refusal, got ${answer.status} ${JSON.stringify(answer.body)}`)
  }
  return answer as Answer<ErrorResponse>
}

/** POST /runs, answered 202: the run as created. */
export async function createRun(service: Service, request: RunRequest, headers?: Headers): Promise<RunState> {
  return expectStatus(await call(service, 'POST', '/runs', { body: request, headers }), 202, 'POST /runs')
}

export async function getRun(service: Service, id: string, headers?: Headers): Promise<RunState> {
  return expectStatus(await call(service, 'GET', `/runs/${id}`, { headers }), 200, `GET /runs/${id}`)
}

export async function listRuns(service: Service, headers?: Headers): Promise<RunSummary[]> {
  return expectStatus(await call(service, 'GET', '/runs', { headers }), 200, 'GET /runs').runs
}

export async function cancelRun(service: Service, id: string, headers?: Headers): Promise<RunState> {
  return expectStatus(await call(service, 'DELETE', `/runs/${id}`, { headers }), 200, `DELETE /runs/${id}`)
}

/** Polls an async run until it has ended, and returns its final state. */
export async function settled(service: Service, id: string, timeoutMs = 10_000, headers?: Headers): Promise<RunState> {
  return until(
    () => getRun(service, id, headers), (state) => state.status !== 'running' && state.status !== 'queued', timeoutMs,
    `run ${id} to end`
  )
}

/** What a stand-in agent received, from its echo (any task that names no scenario). */
export function echoed(result: RunResult): { argv: string[]; prompt: string; cwd: string } {
  const line = result.output.split('\n').find((candidate) => candidate.startsWith('{"agent"'))
  if (line === undefined) throw new Error(`no echo in output: ${result.output}`)
  return JSON.parse(line)
}

/** POST /tools/<tool> asking for a stream (NDJSON unless told otherwise) from a listening service: the raw Response. */
export const openStream = (
  base: string, tool: string, body: unknown, options: { accept?: string; signal?: AbortSignal; headers?: Headers } = {}
) =>
  fetch(`${base}/tools/${tool}`, {
    method: 'POST',
    headers: {
      ...options.headers, 'content-type': 'application/json', accept: options.accept ?? 'application/x-ndjson'
    },
    body: JSON.stringify(body),
    signal: options.signal
  })

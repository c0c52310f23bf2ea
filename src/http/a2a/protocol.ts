import { AgentCard, SSE_HEADERS } from '@a2a-js/sdk'
import { RequestMalformedError, toJsonRpcError, A2A_ERROR_CODE } from '@a2a-js/sdk/errors'
import { JsonRpcTransportHandler, defaultServerCallContextBuilder, validateVersion } from '@a2a-js/sdk/server'
import type { AgentTool } from '../../agents/tools.js'
import { serviceCard, toolCard, type CardSite } from './cards.js'
import { SERVICE_ERROR_DOMAIN } from './errors.js'
import { RunTasks, withCall } from './handler.js'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ToolName } from '../../agents/catalog.js'
import type { RunRegistry } from '../../runs/registry.js'

/** An agent's card in A2A's JSON form: the service's (`tool` undefined) or one tool's. */
export function cardJson(tools: readonly AgentTool[], tool: AgentTool | undefined, site: CardSite): unknown {
  return AgentCard.toJSON(tool === undefined ? serviceCard(tools, site) : toolCard(tool, site))
}

/** What one JSON-RPC call is answered with. */
export interface JsonRpcCall {
  request: FastifyRequest
  reply: FastifyReply
  tool: ToolName | undefined
  toolNames: readonly ToolName[]
  tools: readonly AgentTool[]
  runs: RunRegistry
  site: CardSite
  heartbeatMs: number
  /** undefined: a Last-Event-ID this service never gives. */
  lastEventId: number | undefined
}

/**
 * JSON-RPC's range for an implementation's own errors: a refusal A2A has no code for (a full tool, a spent budget).
 * What it is, a client reads from the ErrorInfo beside it (the service's domain, its code as reason).
 */
const SERVICE_REFUSAL = -32000

interface JsonRpcAnswer {
  jsonrpc: '2.0'
  id: string | number | null
  result?: unknown
  error?: { code: number; message: string; data?: unknown[] }
}

function withServiceCodes(answer: JsonRpcAnswer): JsonRpcAnswer {
  const ours = answer.error?.data?.some((detail) => (detail as { domain?: unknown }).domain === SERVICE_ERROR_DOMAIN)
  return ours === true ? { ...answer, error: { ...answer.error!, code: SERVICE_REFUSAL } } : answer
}

const errorAnswer = (id: JsonRpcAnswer['id'], error: unknown): JsonRpcAnswer =>
  withServiceCodes({ jsonrpc: '2.0', id, error: toJsonRpcError(error) })

/** The request's id when it has a usable one (the transport answers a bad one itself). */
function requestId(body: unknown): JsonRpcAnswer['id'] {
  const id = (body as { id?: unknown } | null)?.id
  return typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id)) ? id : null
}

const isStream = (answer: unknown): answer is AsyncGenerator<JsonRpcAnswer> =>
  typeof (answer as AsyncGenerator | undefined)?.[Symbol.asyncIterator] === 'function'

/** An SSE frame of one answer; a step's carries its event id, for a subscriber that reconnects (Last-Event-ID). */
function sseFrame(answer: JsonRpcAnswer): string {
  const eventId = (answer.result as { statusUpdate?: { metadata?: { event_id?: unknown } } } | undefined)
    ?.statusUpdate?.metadata?.event_id
  return `${typeof eventId === 'string' ? `id: ${eventId}\n` : ''}data: ${JSON.stringify(answer)}\n\n`
}

/**
 * One JSON-RPC call: the SDK's transport reads the request and dispatches it to the runs' handler; this answers with
 * its JSON, or streams its events (SSE) as fast as the client takes them, with a heartbeat while the task is quiet.
 * Errors a JSON-RPC client reads in the body are 200s, as A2A's JSON-RPC binding has them; only a fault is a 500.
 */
export async function answerJsonRpc(call: JsonRpcCall): Promise<void> {
  const { request, reply, tools, site, heartbeatMs } = call
  const tool = tools.find((each) => each.name === call.tool)
  const card = tool === undefined ? serviceCard(tools, site) : toolCard(tool, site)
  const gone = new AbortController()
  reply.raw.once('close', () => gone.abort())
  const id = requestId(request.body)
  const version = request.headers['a2a-version']
  const context = withCall(
    defaultServerCallContextBuilder({
      extensions: undefined,
      user: { isAuthenticated: true, userName: request.caller },
      headers: request.headers,
      requestedVersion: typeof version === 'string' ? version : undefined
    }),
    { caller: request.caller, log: request.log, gone: gone.signal, lastEventId: call.lastEventId ?? 0 }
  )
  try {
    validateVersion(context.requestedVersion, card, 'JSONRPC')
    if (call.lastEventId === undefined) throw new RequestMalformedError('Last-Event-ID is not an id this service gives')
  } catch (error) {
    return void reply.send(errorAnswer(id, error))
  }
  const handler = new RunTasks(call.runs, call.tool, call.toolNames, card)
  const answer = await new JsonRpcTransportHandler(handler).handle(request.body as Record<string, unknown>, context)
  if (!isStream(answer)) {
    const sent = withServiceCodes(answer as JsonRpcAnswer)
    if (sent.error?.code === A2A_ERROR_CODE.INTERNAL_ERROR) request.log.error({ error: sent.error }, 'A2A call failed')
    return void reply.code(sent.error?.code === A2A_ERROR_CODE.INTERNAL_ERROR ? 500 : 200).send(sent)
  }
  // A refusal before the first event (a bad message, a full tool) is answered as a plain JSON-RPC error.
  let first: IteratorResult<JsonRpcAnswer>
  try {
    first = await answer.next()
  } catch (error) {
    return void reply.send(errorAnswer(id, error))
  }
  reply.hijack()
  const raw = reply.raw
  raw.writeHead(200, { ...reply.getHeaders(), ...SSE_HEADERS } as Record<string, string>)
  let heartbeat: NodeJS.Timeout | undefined
  const write = async (text: string): Promise<void> => {
    clearTimeout(heartbeat)
    if (raw.destroyed) return
    heartbeat = setTimeout(() => void write(': heartbeat\n\n'), heartbeatMs)
    if (!raw.write(text)) await new Promise((resolve) => { raw.once('drain', resolve); raw.once('close', resolve) })
  }
  try {
    if (first.done !== true) await write(sseFrame(first.value))
    for (let next = await answer.next(); next.done !== true && !gone.signal.aborted; next = await answer.next()) {
      await write(sseFrame(next.value))
    }
  } catch (error) {
    await write(sseFrame(errorAnswer(id, error)))
  } finally {
    clearTimeout(heartbeat)
    await answer.return(undefined)
    raw.end()
  }
}

import { formatSSEErrorEvent } from '@a2a-js/sdk'
import { A2A_ERROR_CODE, RequestMalformedError, toJsonRpcError } from '@a2a-js/sdk/errors'
import { JsonRpcTransportHandler } from '@a2a-js/sdk/server'
import { dispatch, type A2aCall } from './call.js'
import { serviceError } from '../../errors.js'
import { a2aErrorOf, SERVICE_ERROR_DOMAIN } from './errors.js'
import { checkParamsShape } from './shapes.js'
import { sseFrame, writeSse } from './sse.js'

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

const INTERNAL = a2aErrorOf(serviceError('INTERNAL_ERROR'))

/** The methods whose params carry a message or a push config, checked before the transport converts them. */
const SHAPED_METHODS: Record<string, 'send' | 'create-config' | undefined> = {
  SendMessage: 'send', SendStreamingMessage: 'send', CreateTaskPushNotificationConfig: 'create-config'
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

/** A step's event id, which its frame carries for a subscriber that reconnects. */
const eventIdOf = (answer: JsonRpcAnswer): string | undefined => {
  const eventId = (answer.result as { statusUpdate?: { metadata?: { event_id?: unknown } } } | undefined)
    ?.statusUpdate?.metadata?.event_id
  return typeof eventId === 'string' ? eventId : undefined
}

/**
 * One JSON-RPC call: the SDK's transport reads the request and dispatches it to the runs' handler; this answers with
 * its JSON, or streams its events (SSE). Errors a JSON-RPC client reads in the body are 200s, as A2A's JSON-RPC binding
 * has them; only a fault is a 500.
 */
export async function answerJsonRpc(call: A2aCall): Promise<void> {
  const { request, reply } = call
  const gone = new AbortController()
  reply.raw.once('close', () => gone.abort())
  const id = requestId(request.body)
  let dispatched
  try {
    dispatched = dispatch(call, 'JSONRPC', gone.signal)
    if (call.lastEventId === undefined) throw new RequestMalformedError('Last-Event-ID is not an id this service gives')
    const { method, params } = (request.body ?? {}) as { method?: unknown; params?: unknown }
    const shaped = SHAPED_METHODS[String(method)]
    if (shaped !== undefined && params !== undefined) checkParamsShape(shaped, params)
  } catch (error) {
    return void reply.send(errorAnswer(id, error))
  }
  const { handler, context } = dispatched
  const answer = await new JsonRpcTransportHandler(handler).handle(request.body as Record<string, unknown>, context)
  if (!isStream(answer)) {
    const sent = withServiceCodes(answer as JsonRpcAnswer)
    if (sent.error?.code !== A2A_ERROR_CODE.INTERNAL_ERROR) return void reply.send(sent)
    // The transport's own fault (the handler's are told already): its message stays in the log, as REST's do.
    if (sent.error.message !== INTERNAL.message) request.log.error({ error: sent.error }, 'A2A call failed')
    return void reply.code(500).send(errorAnswer(id, INTERNAL))
  }
  // A refusal before the first event (a bad message, a full tool) is answered as a plain JSON-RPC error.
  let first: IteratorResult<JsonRpcAnswer>
  try {
    first = await answer.next()
  } catch (error) {
    return void reply.send(errorAnswer(id, error))
  }
  const frames = {
    of: (each: JsonRpcAnswer) => sseFrame(each, eventIdOf(each)),
    ofError: (error: unknown) => formatSSEErrorEvent(errorAnswer(id, error))
  }
  await writeSse(reply, first.done === true ? undefined : first.value, answer, frames, call.heartbeatMs, gone.signal)
}

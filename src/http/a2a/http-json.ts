import {
  A2A_CONTENT_TYPE, formatSSEErrorEvent, ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse,
  StreamResponse, Task
} from '@a2a-js/sdk'
import {
  ExtendedAgentCardNotConfiguredError, PushNotificationNotSupportedError, RequestMalformedError, restStatusFor,
  toRestErrorBody
} from '@a2a-js/sdk/errors'
import { dispatch, type A2aCall } from './call.js'
import { ServiceRefusalError } from './errors.js'
import { sseFrame, writeSse } from './sse.js'

/** The HTTP+JSON binding's operations, as its routes name them (docs/a2a.md). */
export type HttpJsonOperation = { name: AgentOperation } | { name: TaskOperation; id: string }
/** What is asked of the agent itself, or of one of its tasks. */
export type AgentOperation = 'send' | 'stream' | 'list' | 'push-config' | 'extended-card'
type TaskOperation = 'get' | 'cancel' | 'subscribe'

/** A refusal's HTTP status: the service's own for its refusals, the binding's table for A2A's. */
const statusOf = (error: unknown): number =>
  error instanceof ServiceRefusalError ? error.httpStatus : restStatusFor(error)

const eventIdOf = (event: StreamResponse): string | undefined => {
  const metadata = event.payload?.$case === 'statusUpdate' ? event.payload.value.metadata : undefined
  const eventId: unknown = metadata?.['event_id']
  return typeof eventId === 'string' ? eventId : undefined
}

/**
 * One call of the HTTP+JSON binding: its request read with the SDK's converters, dispatched to the runs' handler, its
 * answer (A2A's JSON, or its events as SSE) or its refusal (A2A's error body, AIP-193) written back.
 */
export async function answerHttpJson(call: A2aCall, operation: HttpJsonOperation): Promise<void> {
  const { request, reply } = call
  const gone = new AbortController()
  reply.raw.once('close', () => gone.abort())
  const body = (request.body ?? {}) as Record<string, unknown>
  const query = request.query as Record<string, unknown>
  const answer = (status: number, json: unknown) => void reply.code(status).type(A2A_CONTENT_TYPE).send(json)
  try {
    const { handler, context } = dispatch(call, 'HTTP+JSON', gone.signal)
    if (call.lastEventId === undefined) throw new RequestMalformedError('Last-Event-ID is not an id this service gives')
    const stream = async (events: AsyncGenerator<StreamResponse>): Promise<void> => {
      // A refusal before the first event is answered as an error body, not a stream.
      const first = await events.next()
      const frames = {
        of: (event: StreamResponse) => sseFrame(StreamResponse.toJSON(event), eventIdOf(event)),
        ofError: (error: unknown) => formatSSEErrorEvent(toRestErrorBody(error, statusOf(error)))
      }
      const opening = first.done === true ? undefined : first.value
      await writeSse(reply, opening, events, frames, call.heartbeatMs, gone.signal)
    }
    switch (operation.name) {
      case 'send': {
        const task = await handler.sendMessage(SendMessageRequest.fromJSON(body), context)
        return answer(200, SendMessageResponse.toJSON({ payload: { $case: 'task', value: task } }))
      }
      case 'stream':
        return await stream(handler.sendMessageStream(SendMessageRequest.fromJSON(body), context))
      case 'get': {
        const historyLength = query['historyLength'] === undefined ? undefined : Number(query['historyLength'])
        return answer(200, Task.toJSON(await handler.getTask({ tenant: '', id: operation.id, historyLength }, context)))
      }
      case 'cancel': {
        const cancelled = await handler.cancelTask({ tenant: '', id: operation.id, metadata: {} }, context)
        return answer(200, Task.toJSON(cancelled))
      }
      case 'subscribe':
        return await stream(handler.resubscribe({ tenant: '', id: operation.id }, context))
      case 'list': {
        const listed = await handler.listTasks(ListTasksRequest.fromJSON({
          ...query, includeArtifacts: query['includeArtifacts'] === 'true'
        }), context)
        return answer(200, ListTasksResponse.toJSON(listed))
      }
      case 'push-config':
        throw new PushNotificationNotSupportedError()
      case 'extended-card':
        throw new ExtendedAgentCardNotConfiguredError()
    }
  } catch (error) {
    const status = statusOf(error)
    if (status >= 500) request.log.error({ err: error }, 'A2A call failed')
    return answer(status, toRestErrorBody(error, status))
  }
}

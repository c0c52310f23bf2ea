import {
  A2A_CONTENT_TYPE, AgentCard, formatSSEErrorEvent, ListTaskPushNotificationConfigsResponse, ListTasksRequest,
  ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskPushNotificationConfig
} from '@a2a-js/sdk'
import {
  PushNotificationNotSupportedError, RequestMalformedError, restStatusFor, toRestErrorBody
} from '@a2a-js/sdk/errors'
import { dispatch, type A2aCall } from './call.js'
import { answerable, ServiceRefusalError } from './errors.js'
import { checkParamsShape } from './shapes.js'
import { sseFrame, writeSse } from './sse.js'

/** The HTTP+JSON binding's operations, as its routes name them (docs/a2a.md). */
export type HttpJsonOperation =
  | { name: AgentOperation }
  | { name: TaskOperation; id: string }
  | { name: ConfigOperation; id: string; configId: string }
/** What is asked of the agent itself, of one of its tasks, or of one of a task's push-notification configs. */
export type AgentOperation = 'send' | 'stream' | 'list' | 'extended-card'
export type TaskOperation = 'get' | 'cancel' | 'subscribe' | 'create-config' | 'list-configs'
export type ConfigOperation = 'get-config' | 'delete-config'

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
        checkParamsShape('send', body, 'body')
        const sent = await handler.sendMessage(SendMessageRequest.fromJSON(body), context)
        const payload = 'messageId' in sent
          ? { $case: 'message' as const, value: sent }
          : { $case: 'task' as const, value: sent }
        return answer(200, SendMessageResponse.toJSON({ payload }))
      }
      case 'stream':
        checkParamsShape('send', body, 'body')
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
      case 'create-config': {
        // As the SDK's own HTTP+JSON handler: an agent whose card offers no push notifications is not asked.
        if ((await handler.getAgentCard()).capabilities?.pushNotifications !== true) {
          throw new PushNotificationNotSupportedError()
        }
        checkParamsShape('create-config', body, 'body')
        const config = TaskPushNotificationConfig.fromJSON({ ...body, taskId: operation.id })
        const created = await handler.createTaskPushNotificationConfig(config, context)
        return answer(201, TaskPushNotificationConfig.toJSON(created))
      }
      case 'list-configs': {
        const request = { tenant: '', taskId: operation.id, pageSize: 0, pageToken: '' }
        return answer(200, ListTaskPushNotificationConfigsResponse.toJSON(
          await handler.listTaskPushNotificationConfigs(request, context)
        ))
      }
      case 'get-config': {
        const request = { tenant: '', taskId: operation.id, id: operation.configId }
        const found = await handler.getTaskPushNotificationConfig(request, context)
        return answer(200, TaskPushNotificationConfig.toJSON(found))
      }
      case 'delete-config': {
        const request = { tenant: '', taskId: operation.id, id: operation.configId }
        await handler.deleteTaskPushNotificationConfig(request, context)
        return void reply.code(204).send()
      }
      case 'extended-card':
        return answer(200, AgentCard.toJSON(await handler.getAuthenticatedExtendedAgentCard({ tenant: '' }, context)))
    }
  } catch (failure) {
    const error = answerable(failure, request.log)
    const status = statusOf(error)
    return answer(status, toRestErrorBody(error, status))
  }
}

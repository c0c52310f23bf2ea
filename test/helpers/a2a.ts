// The official A2A SDK's client, unmodified, as any A2A client meets the service: from an agent's card, over either
// binding, speaking as a token's owner.
import type { Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { Role, TaskState, type ListTasksRequest, type Message, type Task } from '@a2a-js/sdk'
import {
  ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory, type Client
} from '@a2a-js/sdk/client'
import { build, listen } from './app.js'

/** A listening service with two callers, alice (`secret-a`) and bob (`secret-b`). */
export async function a2aService(
  t: Test, overrides: Record<string, string> = {}, agentEnv?: NodeJS.ProcessEnv
): Promise<{ app: FastifyInstance; base: string }> {
  const app = await build(t, { API_TOKENS: 'alice:secret-a,bob:secret-b', ...overrides }, agentEnv)
  return { app, base: await listen(t, app) }
}

export type Binding = 'JSONRPC' | 'HTTP+JSON'
export const BINDINGS: Binding[] = ['JSONRPC', 'HTTP+JSON']

const headersOf = (init: RequestInit | undefined): Record<string, string> =>
  Object.fromEntries(new Headers(init?.headers).entries())

/** The SDK's client for the agent at `path`, found from its card, on `binding`, with the token ('' for none). */
export async function a2aClient(
  base: string, path: string, token: string, binding: Binding = 'JSONRPC'
): Promise<Client> {
  const fetchImpl: typeof fetch = (input, init) => fetch(input, {
    ...init, headers: { ...headersOf(init), ...(token === '' ? {} : { authorization: `Bearer ${token}` }) }
  })
  // The SDK types its options as classes it does not export; its README passes plain objects, as here.
  /* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment */
  const transports = [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })]
  /* eslint-enable @typescript-eslint/no-unsafe-class-instance-assignment */
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports, preferredTransports: [binding]
  }))
  return factory.createFromUrl(`${base}${path}/`)
}

/** A user's message whose text parts are `text` (or the parts given), with run options in its metadata. */
export function userMessage(text: string, metadata?: Record<string, unknown>, parts?: Message['parts']): Message {
  return {
    messageId: `m-${Math.random().toString(36).slice(2)}`,
    contextId: '',
    taskId: '',
    role: Role.ROLE_USER,
    parts: parts ?? [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
    metadata,
    extensions: [],
    referenceTaskIds: []
  }
}

/** SendMessage, blocking unless told otherwise: the task it answers with. */
export const sendMessage = (client: Client, message: Message, returnImmediately = false): Promise<Task> =>
  client.sendMessage({
    tenant: '',
    message,
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately },
    metadata: undefined
  }) as Promise<Task>

/** ListTasks for every task of the caller's, and what to narrow it with. */
export const allTasks = (narrower: Partial<ListTasksRequest> = {}): ListTasksRequest => ({
  tenant: '',
  contextId: '',
  status: TaskState.TASK_STATE_UNSPECIFIED,
  pageToken: '',
  statusTimestampAfter: undefined,
  ...narrower
})

/** The text of a task's `answer` artifact. */
export const answerOf = (task: Task): string => {
  const part = task.artifacts.find((artifact) => artifact.artifactId === 'answer')?.parts[0]?.content
  return part?.$case === 'text' ? part.value : ''
}

export interface ErrorInfo { reason: string; domain: string; metadata?: Record<string, string> }

/**
 * An A2A error as the client reads it: its name, message, JSON-RPC code or HTTP status, and the service's code (the
 * ErrorInfo's metadata, which the SDK keeps for A2A's own errors).
 */
export async function a2aRefusal(work: Promise<unknown>): Promise<{
  name: string; message: string; rpcCode?: number; statusCode?: number; code?: string; info?: ErrorInfo
}> {
  try {
    await work
  } catch (error) {
    const { name, message, envelopeCode, statusCode, data, metadata } = error as {
      name: string;
      message: string;
      envelopeCode?: number;
      statusCode?: number;
      data?: ErrorInfo[]
      metadata?: Record<string, string>
    }
    return {
      name,
      message,
      rpcCode: envelopeCode,
      statusCode,
      code: data?.[0]?.metadata?.['code'] ?? metadata?.['code'],
      info: data?.[0]
    }
  }
  throw new Error('not refused')
}

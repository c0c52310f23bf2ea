import type {
  AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest,
  GetTaskRequest, ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse, ListTasksRequest,
  ListTasksResponse, Message, SendMessageRequest, StreamResponse, SubscribeToTaskRequest, Task,
  TaskPushNotificationConfig
} from '@a2a-js/sdk'
import {
  ExtendedAgentCardNotConfiguredError, RequestMalformedError,
  TaskNotCancelableError, UnsupportedOperationError
} from '@a2a-js/sdk/errors'
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server'
import type { FastifyBaseLogger } from 'fastify'
import type { ToolName } from '../../agents/catalog.js'
import { serviceError, ServiceError } from '../../errors.js'
import { parseFrame } from '../../runs/events.js'
import type { RunRegistry } from '../../runs/registry.js'
import type { RunPush } from '../../runs/run.js'
import { randomUUID } from 'node:crypto'
import type { RunState } from '../../schemas/runs.js'
import { paramsOf } from '../run-params.js'
import { a2aErrorOf } from './errors.js'
import { contextOf, endUpdates, isTerminal, stepUpdate, taskEvent, taskOf, taskStateOf } from './tasks.js'
import { pageOf } from './pages.js'

/** What a call carries beside its A2A parameters: set by the route in the context's state. */
export interface CallState {
  caller: string
  log: FastifyBaseLogger
  /** Aborted when the client leaves: a stream stops following its task (the task goes on). */
  gone: AbortSignal
  /** The Last-Event-ID a resubscribing client gave: its stream resumes after that event. */
  lastEventId: number
}

const CALL = 'agent-runner'

export function withCall(context: ServerCallContext, call: CallState): ServerCallContext {
  context.state.set(CALL, call)
  return context
}

const callOf = (context: ServerCallContext): CallState => context.state.get(CALL) as CallState

/** A history length as A2A has it: none (no limit), or a count of messages. */
function checkedHistoryLength(historyLength: number | undefined): number | undefined {
  if (historyLength === undefined || (Number.isInteger(historyLength) && historyLength >= 0)) return historyLength
  throw new RequestMalformedError('historyLength must be a non-negative integer')
}

/** The longest push URL taken, as a webhook's. */
const PUSH_URL_MAX = 2048

/** The longest credential (token, scheme or credentials) a push's receiver may ask to be sent. */
const PUSH_CREDENTIAL_MAX = 4096

/**
 * What may stand in a header a receiver asked for (RFC 9110): a scheme is a token, credentials token68, the
 * notification token visible ASCII; anything else (CR, LF, a space, a control, non-ASCII) would make the request
 * unsendable or split it, so it is refused when given rather than failing at every delivery.
 */
const HEADER_VALUE_FORMS = {
  scheme: /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/,
  credentials: /^[A-Za-z0-9._~+/-]+=*$/,
  token: /^[\x21-\x7e]+$/
} as const

function checkedCredential(field: keyof typeof HEADER_VALUE_FORMS, value: string, path: string): string {
  if (value.length <= PUSH_CREDENTIAL_MAX && HEADER_VALUE_FORMS[field].test(value)) return value
  const form = field === 'scheme' ? 'an RFC 9110 token' : field === 'credentials' ? 'RFC 9110 token68' : 'visible ASCII'
  throw refused(`${path}: ${form} of at most ${String(PUSH_CREDENTIAL_MAX)} characters (no spaces, CR or LF)`)
}

/** What a push's receiver asked to be sent: its own credentials, as A2A has them (Authorization first). */
function pushHeaders(config: TaskPushNotificationConfig, path: string): Record<string, string> {
  const { scheme, credentials } = config.authentication ?? { scheme: '', credentials: '' }
  if (scheme !== '' && credentials !== '') {
    const given = `${checkedCredential('scheme', scheme, `${path}/authentication/scheme`)} ` +
      checkedCredential('credentials', credentials, `${path}/authentication/credentials`)
    return { authorization: given }
  }
  if (config.token === '') return {}
  return { 'x-a2a-notification-token': checkedCredential('token', config.token, `${path}/token`) }
}

/** A message's push config as its run's push notifications, in A2A's form; checked as webhooks are, at launch. */
function pushOf(config: TaskPushNotificationConfig | undefined, path: string): RunPush | undefined {
  if (config === undefined) return undefined
  if (config.url === '' || config.url.length > PUSH_URL_MAX) {
    throw refused(`${path}/url: a URL of at most ${String(PUSH_URL_MAX)} characters`)
  }
  return { config: config.id || randomUUID(), url: config.url, headers: pushHeaders(config, path) }
}

/** A push config as it was given, from what its deliveries keep. */
function pushConfigOf(
  taskId: string, push: Awaited<ReturnType<RunRegistry['pushesOf']>>[number]
): TaskPushNotificationConfig {
  const authorization = push.headers['authorization']
  const space = authorization?.indexOf(' ') ?? -1
  return {
    tenant: '',
    id: push.config,
    taskId,
    url: push.url,
    token: push.headers['x-a2a-notification-token'] ?? '',
    authentication: authorization === undefined
      ? undefined
      : { scheme: authorization.slice(0, space), credentials: authorization.slice(space + 1) }
  }
}

const refused = (detail: string) => a2aErrorOf(new ServiceError('VALIDATION_ERROR', detail))

/**
 * The message's text parts, as one task: byte for byte, in order, nothing between them. A file or a data part is no
 * task an agent's prompt can carry.
 */
function taskText(message: Message): string {
  if (message.parts.some((part) => part.content?.$case !== 'text')) {
    throw refused('message/parts: only text parts make a task')
  }
  if (message.parts.length === 0) throw refused('message/parts: no text part: the task is the message’s text')
  return message.parts.map((part) => (part.content as { value: string }).value).join('')
}

/**
 * One tool's runs (or every tool's, for the service's agent) as A2A tasks: every operation is the REST API's (a task
 * is an async run: the same id, store, owner and refusals), spoken in A2A's types; the SDK's transports parse and
 * answer the wire.
 */
export class RunTasks implements A2ARequestHandler {
  readonly #runs: RunRegistry
  /** undefined: the service's agent, every tool's tasks, the tool named by each message. */
  readonly #tool: ToolName | undefined
  readonly #toolNames: readonly ToolName[]
  readonly #card: AgentCard

  constructor(runs: RunRegistry, tool: ToolName | undefined, toolNames: readonly ToolName[], card: AgentCard) {
    this.#runs = runs
    this.#tool = tool
    this.#toolNames = toolNames
    this.#card = card
  }

  async getAgentCard(): Promise<AgentCard> {
    return this.#card
  }

  async getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    throw new ExtendedAgentCardNotConfiguredError()
  }

  async sendMessage(params: SendMessageRequest, context: ServerCallContext): Promise<Task> {
    const { caller } = callOf(context)
    const { run, result } = await this.#launch(params, context)
    const historyLength = checkedHistoryLength(params.configuration?.historyLength)
    if (params.configuration?.returnImmediately === true) return taskOf(run, historyLength)
    // The task goes on whatever becomes of this request: it is async, as POST /runs's.
    await result.catch(() => undefined)
    return taskOf(await this.#owned(run.id, caller), historyLength)
  }

  async* sendMessageStream(params: SendMessageRequest, context: ServerCallContext): AsyncGenerator<StreamResponse> {
    const { caller } = callOf(context)
    const { run } = await this.#launch(params, context)
    yield taskEvent(taskOf(run))
    yield* this.#follow(run, caller, 0, callOf(context).gone)
  }

  async* resubscribe(params: SubscribeToTaskRequest, context: ServerCallContext): AsyncGenerator<StreamResponse> {
    const { caller, gone, lastEventId } = callOf(context)
    const state = await this.#owned(params.id, caller)
    if (isTerminal(taskStateOf(state))) throw new UnsupportedOperationError(`Task ${state.id} has ended.`)
    yield taskEvent(taskOf(state))
    yield* this.#follow(state, caller, lastEventId, gone)
  }

  async getTask(params: GetTaskRequest, context: ServerCallContext): Promise<Task> {
    return taskOf(await this.#owned(params.id, callOf(context).caller), checkedHistoryLength(params.historyLength))
  }

  async listTasks(params: ListTasksRequest, context: ServerCallContext): Promise<ListTasksResponse> {
    const { caller } = callOf(context)
    const mine = (await this.#runs.list(caller)).filter((run) => this.#tool === undefined || run.tool === this.#tool)
    const page = pageOf(mine, params)
    const states = await Promise.all(page.runs.map((run) => this.#runs.state(run.id, caller)))
    const historyLength = checkedHistoryLength(params.historyLength)
    // Artifacts only when asked for (A2A's default keeps a list light).
    const listed = (state: RunState): Task =>
      ({ ...taskOf(state, historyLength), ...(params.includeArtifacts === true ? {} : { artifacts: [] }) })
    return {
      tasks: states.filter((state) => state !== undefined).map(listed),
      nextPageToken: page.nextPageToken,
      pageSize: page.pageSize,
      totalSize: page.totalSize
    }
  }

  async cancelTask(params: CancelTaskRequest, context: ServerCallContext): Promise<Task> {
    const { caller } = callOf(context)
    const state = await this.#owned(params.id, caller)
    if (isTerminal(taskStateOf(state))) throw new TaskNotCancelableError(`Task ${state.id} has ended.`)
    const cancelled = await this.#runs.cancel(state.id, caller)
    return taskOf(cancelled ?? state)
  }

  /**
   * A push config added to a task that waits or runs: its current status is sent at once, and its end as it comes
   * (with the message that creates the task, a config misses nothing).
   */
  async createTaskPushNotificationConfig(
    params: TaskPushNotificationConfig, context: ServerCallContext
  ): Promise<TaskPushNotificationConfig> {
    const { caller } = callOf(context)
    const state = await this.#owned(params.taskId, caller)
    if (isTerminal(taskStateOf(state))) throw new UnsupportedOperationError(`Task ${state.id} has ended.`)
    const push = pushOf(params, 'taskPushNotificationConfig')!
    if ((await this.#runs.addPush(state.id, caller, push)) === undefined) {
      throw new UnsupportedOperationError(`Task ${state.id} is a synchronous run: its caller has its end.`)
    }
    return { ...params, id: push.config, taskId: state.id }
  }

  async getTaskPushNotificationConfig(
    params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
  ): Promise<TaskPushNotificationConfig> {
    const found = (await this.#pushConfigs(params.taskId, context)).find((config) => config.id === params.id)
    if (found === undefined) throw a2aErrorOf(serviceError('RUN_NOT_FOUND', `${params.taskId}/${params.id}`))
    return found
  }

  async listTaskPushNotificationConfigs(
    params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
  ): Promise<ListTaskPushNotificationConfigsResponse> {
    return { configs: await this.#pushConfigs(params.taskId, context), nextPageToken: '' }
  }

  /** A push config removed: what it had not sent yet is not sent. */
  async deleteTaskPushNotificationConfig(
    params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
  ): Promise<void> {
    const { caller } = callOf(context)
    await this.#owned(params.taskId, caller)
    if (!(await this.#runs.dropPush(params.taskId, caller, params.id))) {
      throw a2aErrorOf(serviceError('RUN_NOT_FOUND', `${params.taskId}/${params.id}`))
    }
  }

  /** A task's push configs as its client gave them, read back from its deliveries. */
  async #pushConfigs(taskId: string, context: ServerCallContext): Promise<TaskPushNotificationConfig[]> {
    const { caller } = callOf(context)
    await this.#owned(taskId, caller)
    return (await this.#runs.pushesOf(taskId, caller)).map((push) => pushConfigOf(taskId, push))
  }

  /** A task of this tool's and this caller's; any other is not found, as REST's runs are. */
  async #owned(id: string, caller: string): Promise<RunState> {
    const state = await this.#runs.state(id, caller)
    if (state === undefined || (this.#tool !== undefined && state.tool !== this.#tool)) {
      throw a2aErrorOf(serviceError('RUN_NOT_FOUND', id))
    }
    return state
  }

  /** A new async run for the message, refused as POST /runs refuses (before any slot or agent). */
  async #launch(params: SendMessageRequest, context: ServerCallContext) {
    const { caller, log } = callOf(context)
    const message = params.message
    if (message === undefined) throw new RequestMalformedError('message is required')
    if (message.messageId === '') throw new RequestMalformedError('message.messageId is required')
    if (message.taskId !== '') {
      const state = await this.#owned(message.taskId, caller)
      throw new UnsupportedOperationError(`Task ${state.id} takes no more messages: send a new one.`)
    }
    const { tool: named, ...metadata } = (message.metadata ?? {}) as Record<string, unknown>
    if (Object.hasOwn(metadata, 'task')) throw refused('message/metadata/task: the task is the message text')
    const continued = message.contextId === '' ? undefined : await this.#continued(message.contextId, caller)
    if (continued !== undefined && Object.hasOwn(metadata, 'resume')) {
      throw refused('message/metadata/resume: a message in a context continues that context’s session')
    }
    const tool = continued?.tool ?? this.#tool ?? this.#toolNames.find((name) => name === named)
    if (tool === undefined) {
      throw refused(`message/metadata/tool must be one of ${this.#toolNames.join(', ')}`)
    }
    if (named !== undefined && named !== tool) {
      throw refused(`message/metadata/tool: this ${continued === undefined ? 'agent' : 'context'} is ${tool}’s`)
    }
    const resume = continued === undefined ? {} : { resume: continued.session }
    const runParams = paramsOf({ ...metadata, ...resume, task: taskText(message) })
    if (runParams instanceof ServiceError) throw a2aErrorOf(runParams)
    const push = pushOf(params.configuration?.taskPushNotificationConfig, 'configuration/taskPushNotificationConfig')
    const launched = this.#runs.launch({
      kind: 'async', tool, params: runParams, caller, log, context: continued?.context, push
    })
    return { run: await launched.accepted(), result: launched.result }
  }

  /**
   * The conversation a message continues: its context's latest task (this caller's, of this agent's tool; any other is
   * not found, as a task is), ended, and the session its agent reported, which the new task resumes.
   */
  async #continued(contextId: string, caller: string): Promise<{ context: string; tool: ToolName; session: string }> {
    const latest = (await this.#runs.list(caller))
      .find((run) => contextOf(run) === contextId && (this.#tool === undefined || run.tool === this.#tool))
    if (latest === undefined) throw a2aErrorOf(serviceError('RUN_NOT_FOUND', contextId))
    if (!isTerminal(taskStateOf({ ...latest, result: null }))) {
      throw new UnsupportedOperationError(`Task ${latest.id} of this context is still running: wait for its end.`)
    }
    const session = (await this.#runs.state(latest.id, caller))?.result?.session_id ?? null
    if (session === null) {
      throw new UnsupportedOperationError(`Task ${latest.id} left no session to continue: its agent reported none.`)
    }
    return { context: contextId, tool: latest.tool as ToolName, session }
  }

  /**
   * A task's steps as status messages as they come, from after `lastId`, then its artifacts and final status once it
   * ends; pulled only as fast as the client takes them, as /runs/{id}/events is.
   */
  async* #follow(task: RunState, caller: string, lastId: number, gone: AbortSignal): AsyncGenerator<StreamResponse> {
    const feed = await this.#runs.feed(task.id, caller)
    if (feed === undefined) return
    for await (const frames of feed(lastId, 'steps', gone)) {
      for (const frame of frames) {
        const event = parseFrame(frame)
        if (event.type === 'step') yield stepUpdate(task, event)
      }
    }
    if (gone.aborted) return
    const state = await this.#runs.state(task.id, caller)
    if (state !== undefined && isTerminal(taskStateOf(state))) yield* endUpdates(state)
  }
}

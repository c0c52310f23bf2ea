import t, { type Test } from 'tap'
import { Role, TaskState, type Message, type StreamResponse, type Task } from '@a2a-js/sdk'
import {
  ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, type Client
} from '@a2a-js/sdk/client'
import type { FastifyInstance } from 'fastify'
import { randomUUID } from 'node:crypto'
import {
  build, echoed, getRun, heldAgent, isAlive, listen, readPidFile, releaseStep, scenario, tempDir, until
} from '../helpers/index.js'

// The agents as A2A 1.0 agents, driven by the official SDK's client, unmodified, over a listening service: a task is
// a run (same id, store, owner, refusals), its steps stream as status messages, its answer is an artifact.

const ALICE = 'secret-a'
const BOB = 'secret-b'

async function service(
  t: Test, overrides: Record<string, string> = {}
): Promise<{ app: FastifyInstance; base: string }> {
  const app = await build(t, { API_TOKENS: 'alice:secret-a,bob:secret-b', ...overrides })
  return { app, base: await listen(t, app) }
}

/** The SDK's client for one agent, found from its card, speaking as the token's owner. */
async function clientOf(base: string, path: string, token: string): Promise<Client> {
  const fetchImpl: typeof fetch = (input, init) =>
    fetch(input, { ...init, headers: { ...headersOf(init), authorization: `Bearer ${token}` } })
  // The SDK types its options as a class it does not export; its README passes a plain object, as here.
  // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment
  const transport = new JsonRpcTransportFactory({ fetchImpl })
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [transport]
  }))
  return factory.createFromUrl(`${base}${path}/`)
}

const headersOf = (init: RequestInit | undefined): Record<string, string> =>
  Object.fromEntries(new Headers(init?.headers).entries())

function userMessage(text: string, metadata?: Record<string, unknown>, parts?: Message['parts']): Message {
  return {
    messageId: randomUUID(),
    contextId: '',
    taskId: '',
    role: Role.ROLE_USER,
    parts: parts ?? [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
    metadata,
    extensions: [],
    referenceTaskIds: []
  }
}

const send = (client: Client, message: Message, returnImmediately = false): Promise<Task> =>
  client.sendMessage({
    tenant: '',
    message,
    configuration: {
      acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately
    },
    metadata: undefined
  }) as Promise<Task>

const answerOf = (task: Task): string => {
  const part = task.artifacts.find((artifact) => artifact.artifactId === 'answer')?.parts[0]?.content
  return part?.$case === 'text' ? part.value : ''
}

interface ErrorInfo { reason: string; domain: string; metadata?: Record<string, string> }

/** An A2A error as the client reads it: its name, message, JSON-RPC code, and the service's code in its ErrorInfo. */
async function a2aRefusal(work: Promise<unknown>): Promise<{
  name: string; message: string; rpcCode: number; code?: string; info?: ErrorInfo
}> {
  try {
    await work
  } catch (error) {
    const { name, message, envelopeCode, data } = error as {
      name: string; message: string; envelopeCode: number; data?: ErrorInfo[]
    }
    return { name, message, rpcCode: envelopeCode, code: data?.[0]?.metadata?.['code'], info: data?.[0] }
  }
  throw new Error('not refused')
}

t.test('cards: each tool’s and the service’s, public, naming the JSON-RPC endpoint and the bearer scheme',
  async (t) => {
    const { base } = await service(t)
    const card = await (await fetch(`${base}/a2a/claude_run/.well-known/agent-card.json`)).json()
    t.match(card, {
      name: /claude/,
      supportedInterfaces: [{ url: `${base}/a2a/claude_run`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
      capabilities: { streaming: true },
      securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: 'Bearer' } } },
      skills: [{ id: 'claude_run' }]
    })
    const root = await (await fetch(`${base}/.well-known/agent-card.json`)).json() as {
      skills: Array<{ id: string, description: string }>
    }
    t.match(root, { name: 'agent-runner', supportedInterfaces: [{ url: `${base}/a2a` }] })
    t.same(
      root.skills.map((skill: { id: string }) => skill.id).sort(),
      ['claude_run', 'codex_run', 'crush_run', 'gemini_run', 'opencode_run'],
      'one skill per tool'
    )
    t.match(root.skills[0]!.description, /\/a2a\/\w+_run\/\.well-known\/agent-card\.json/, 'each links its tool’s card')
    const withoutTokens = await build(t)
    const openBase = await listen(t, withoutTokens)
    const open = await (await fetch(`${openBase}/a2a/codex_run/.well-known/agent-card.json`)).json() as {
      securitySchemes?: object
    }
    t.same(open.securitySchemes ?? {}, {}, 'no scheme without tokens')
  })

t.test('SendMessage blocks until the run ends: the text byte for byte, the answer an artifact, the task a run',
  async (t) => {
    const { app, base } = await service(t)
    const client = await clientOf(base, '/a2a/codex_run', ALICE)
    const text = '--help me; $(rm -rf /) "quoted" `tick`'
    const cwd = tempDir(t)
    const task = await send(client, userMessage(text, { cwd, timeout: 60 }))
    t.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED)
    const seen = echoed({ output: answerOf(task) } as Parameters<typeof echoed>[0])
    t.equal(seen.prompt, text, 'the task reached the agent as its prompt, never a flag')
    t.equal(seen.cwd, cwd, 'run options come from the message’s metadata')
    const run = await getRun(app, task.id, { authorization: `Bearer ${ALICE}` })
    t.match(run, { id: task.id, tool: 'codex_run', kind: 'async', status: 'succeeded', caller: 'alice' })
    t.equal(task.contextId, task.id, 'a new task opens its own context')
    t.equal(task.history.length, 1, 'its history: the answer')
  })

t.test('returnImmediately answers with the task as it starts; GetTask follows it; GET /runs lists it', async (t) => {
  const { app, base } = await service(t)
  const client = await clientOf(base, '/a2a/claude_run', ALICE)
  const held = heldAgent(t)
  const task = await send(client, userMessage(held.task), true)
  t.equal(task.status?.state, TaskState.TASK_STATE_WORKING)
  held.release()
  const done = await until(
    () => client.getTask({ tenant: '', id: task.id, historyLength: 0 }),
    (found) => found.status?.state === TaskState.TASK_STATE_COMPLETED, 10_000, 'the task to complete'
  )
  t.equal(answerOf(done), 'released')
  t.same(done.history, [], 'historyLength 0: no message')
  const listed = (await app.inject({ url: '/runs', headers: { authorization: `Bearer ${ALICE}` } })).json().runs
  t.ok(listed.some((run: { id: string }) => run.id === task.id), 'visible in /runs')
})

t.test('SendStreamingMessage: the task, each step as a status message, the answer, then the final status',
  async (t) => {
    const { base } = await service(t)
    const client = await clientOf(base, '/a2a/claude_run', ALICE)
    const events: StreamResponse[] = []
    for await (const event of client.sendMessageStream({
      tenant: '', message: userMessage(scenario.toolCalls(2, 10)), configuration: undefined, metadata: undefined
    })) events.push(event)
    t.equal(events[0]?.payload?.$case, 'task', 'the task first')
    const steps = events.filter((event) => event.payload?.$case === 'statusUpdate' &&
      event.payload.value.status?.state === TaskState.TASK_STATE_WORKING)
    t.ok(steps.length >= 2, 'the steps as they came')
    t.match(JSON.stringify(steps.map((step) => step.payload?.value)), /"kind":"command"/, 'each with its step as data')
    const artifact = events.find((event) => event.payload?.$case === 'artifactUpdate')
    t.match(artifact?.payload?.value, { artifact: { artifactId: 'answer' } })
    const last = events.at(-1)?.payload
    t.match(last, { $case: 'statusUpdate', value: { status: { state: TaskState.TASK_STATE_COMPLETED } } })
  })

t.test('CancelTask stops the agent and its tree; an ended task is not cancelable', async (t) => {
  const { base } = await service(t)
  const client = await clientOf(base, '/a2a/gemini_run', ALICE)
  const held = heldAgent(t)
  const task = await send(client, userMessage(held.task), true)
  const pid = await readPidFile(held.pidFile)
  const cancelled = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined })
  t.equal(cancelled.status?.state, TaskState.TASK_STATE_CANCELED)
  t.notOk(isAlive(pid), 'the agent is gone')
  t.match(await a2aRefusal(client.cancelTask({ tenant: '', id: task.id, metadata: undefined })),
    { name: 'TaskNotCancelableError' })
})

t.test('ownership: another token’s task is not found, its list holds none of them', async (t) => {
  const { base } = await service(t)
  const alice = await clientOf(base, '/a2a/codex_run', ALICE)
  const bob = await clientOf(base, '/a2a/codex_run', BOB)
  const task = await send(alice, userMessage('mine'))
  t.match(await a2aRefusal(bob.getTask({ tenant: '', id: task.id })),
    { name: 'TaskNotFoundError', code: 'RUN_NOT_FOUND' })
  t.match(await a2aRefusal(bob.cancelTask({ tenant: '', id: task.id, metadata: undefined })),
    { name: 'TaskNotFoundError' })
  const listRequest = {
    tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', statusTimestampAfter: undefined
  }
  t.same((await bob.listTasks(listRequest)).tasks, [])
  t.same((await alice.listTasks(listRequest)).tasks.map((each) => each.id), [task.id])
  const other = await clientOf(base, '/a2a/claude_run', ALICE)
  t.match(await a2aRefusal(other.getTask({ tenant: '', id: task.id })), { name: 'TaskNotFoundError' },
    'another tool’s agent knows none of this tool’s tasks')
})

t.test('ListTasks pages with a cursor, newest first', async (t) => {
  const { base } = await service(t)
  const client = await clientOf(base, '/a2a/codex_run', ALICE)
  const ids: string[] = []
  for (let i = 0; i < 5; i++) ids.push((await send(client, userMessage(`task ${i}`))).id)
  const seen: string[] = []
  let pageToken = ''
  do {
    const page = await client.listTasks({
      tenant: '',
      contextId: '',
      status: TaskState.TASK_STATE_UNSPECIFIED,
      pageSize: 2,
      pageToken,
      statusTimestampAfter: undefined
    })
    t.ok(page.tasks.length <= 2)
    t.equal(page.totalSize, 5)
    seen.push(...page.tasks.map((task) => task.id))
    pageToken = page.nextPageToken
  } while (pageToken !== '')
  t.same(seen, [...ids].reverse())
})

t.test('refusals are A2A errors carrying the service’s code, and start nothing', async (t) => {
  const { base } = await service(t, { MAX_CODEX_AGENTS: '1' })
  const client = await clientOf(base, '/a2a/codex_run', ALICE)
  const data = [
    { content: { $case: 'data' as const, value: { x: 1 } }, metadata: undefined, filename: '', mediaType: '' }
  ]
  t.match(await a2aRefusal(send(client, userMessage('', undefined, data))),
    { name: 'RequestMalformedError', code: 'VALIDATION_ERROR', message: /only text parts/ })
  t.match(await a2aRefusal(send(client, userMessage('', undefined, []))),
    { name: 'RequestMalformedError', code: 'VALIDATION_ERROR', message: /no text part/ })
  t.match(await a2aRefusal(send(client, userMessage('x', { timeout: 0 }))),
    { name: 'RequestMalformedError', code: 'VALIDATION_ERROR', message: /timeout/ })
  t.match(await a2aRefusal(send(client, userMessage('x', { task: 'other' }))), { code: 'VALIDATION_ERROR' })
  const held = heldAgent(t)
  await send(client, userMessage(held.task), true)
  const full = await a2aRefusal(send(client, userMessage('x')))
  t.match(full, {
    rpcCode: -32000,
    code: 'AGENT_LIMIT_REACHED',
    message: /1/,
    info: { domain: 'agent-runner', reason: 'AGENT_LIMIT_REACHED', metadata: { status: '429' } }
  }, 'a full tool: not now, in the service’s own terms')
})

t.test('plain JSON-RPC: a request without A2A-Version is a 0.3 client’s, refused as the spec says', async (t) => {
  const { base } = await service(t)
  const body = {
    jsonrpc: '2.0',
    id: 7,
    method: 'SendMessage',
    params: { message: { messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'hello' }] } }
  }
  const headers = { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json' }
  const old = await (
    await fetch(`${base}/a2a/codex_run`, { method: 'POST', headers, body: JSON.stringify(body) })
  ).json()
  t.match(old, { jsonrpc: '2.0', id: 7, error: { code: -32009 } }, 'VersionNotSupportedError')
  const current = await (await fetch(`${base}/a2a/codex_run`, {
    method: 'POST', headers: { ...headers, 'a2a-version': '1.0' }, body: JSON.stringify(body)
  })).json()
  t.match(current, { jsonrpc: '2.0', id: 7, result: { task: { status: { state: 'TASK_STATE_COMPLETED' } } } })
  const noToken = await fetch(`${base}/a2a/codex_run`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'a2a-version': '1.0' }, body: JSON.stringify(body)
  })
  t.equal(noToken.status, 401, 'the token the REST API needs')
  const full = await (await fetch(`${base}/a2a/codex_run`, {
    method: 'POST',
    headers: { ...headers, 'a2a-version': '1.0' },
    body: JSON.stringify({ ...body, params: { message: { ...body.params.message, metadata: { timeout: 'soon' } } } })
  })).json()
  t.match(full, {
    id: 7, error: { code: -32602, data: [{ reason: 'INVALID_PARAMS', metadata: { code: 'VALIDATION_ERROR' } }] }
  })
})

t.test('SubscribeToTask: several subscribers each get every step; one resumes after the last event it got',
  async (t) => {
    const { base } = await service(t, { STREAM_HEARTBEAT_MS: '50' })
    const client = await clientOf(base, '/a2a/claude_run', ALICE)
    const dir = tempDir(t)
    const task = await send(client, userMessage(scenario.gated(dir, 'out:one', 'out:two')), true)
    const headers = {
      authorization: `Bearer ${ALICE}`, 'content-type': 'application/json', 'a2a-version': '1.0'
    }
    const subscribe = (extra: Record<string, string> = {}) => fetch(`${base}/a2a/claude_run`, {
      method: 'POST',
      headers: { ...headers, ...extra },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: task.id } })
    })
    const stepsOf = (text: string) => [...text.matchAll(/^id: (\S+)$/gm)].map((match) => match[1]!)
    const first = await subscribe()
    const second = await subscribe()
    t.equal(first.headers.get('content-type'), 'text/event-stream')
    releaseStep(dir, 1)
    // The first subscriber reads until its first step, and the third resumes after it.
    const reader = first.body!.getReader()
    let seen = ''
    while (stepsOf(seen).length === 0) seen += new TextDecoder().decode((await reader.read()).value)
    const resumed = await subscribe({ 'last-event-id': stepsOf(seen)[0]! })
    releaseStep(dir, 2)
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      seen += new TextDecoder().decode(chunk.value)
    }
    const [two, three] = await Promise.all([second.text(), resumed.text()])
    t.ok(stepsOf(seen).length > 1, 'steps carry their event ids')
    t.same(stepsOf(two), stepsOf(seen), 'each subscriber got every step')
    t.same(stepsOf(three), stepsOf(seen).slice(1), 'a subscriber resumed after the event it named, missing none')
    t.match(seen, /: heartbeat/, 'a heartbeat while the agent waited')
    t.match(three, /TASK_STATE_COMPLETED/)
    t.match(await a2aRefusal(client.resubscribeTask({ tenant: '', id: task.id }).next()),
      { name: 'UnsupportedOperationError' }, 'an ended task has nothing to subscribe to')
  })

t.test('the service’s agent runs the tool the message names, and knows every tool’s tasks', async (t) => {
  const { base } = await service(t)
  const client = await clientOf(base, '/a2a', ALICE)
  const task = await send(client, userMessage('hello', { tool: 'gemini_run' }))
  t.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED)
  t.match(task.metadata, { run: { tool: 'gemini_run' } })
  t.equal((await client.getTask({ tenant: '', id: task.id })).id, task.id)
  t.match(await a2aRefusal(send(client, userMessage('hello'))), { code: 'VALIDATION_ERROR', message: /metadata\/tool/ })
  const own = await clientOf(base, '/a2a/codex_run', ALICE)
  t.match(await a2aRefusal(send(own, userMessage('hello', { tool: 'gemini_run' }))), { code: 'VALIDATION_ERROR' },
    'a tool’s agent runs only its tool')
  t.equal((await send(own, userMessage('hello', { tool: 'codex_run' }))).status?.state,
    TaskState.TASK_STATE_COMPLETED, 'naming its own tool is no harm')
})

t.test('what is not offered is refused as A2A says: push configs, the extended card, messages to a task', async (t) => {
  const { base } = await service(t)
  const client = await clientOf(base, '/a2a/codex_run', ALICE)
  const task = await send(client, userMessage('done'))
  const rpc = (method: string, params: object) => fetch(`${base}/a2a/codex_run`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALICE}`, 'content-type': 'application/a2a+json', 'a2a-version': '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'x', method, params })
  }).then((response) => response.json() as Promise<{ error?: { code: number } }>)
  t.throws(() => client.createTaskPushNotificationConfig({
    tenant: '', id: 'c1', taskId: task.id, url: 'https://example.com/hook', token: '', authentication: undefined
  }), { name: 'PushNotificationNotSupportedError' }, 'the SDK’s client reads the card and does not ask')
  const configs = [
    ['CreateTaskPushNotificationConfig', { taskId: task.id, url: 'https://example.com/hook' }],
    ['GetTaskPushNotificationConfig', { taskId: task.id, id: 'c1' }],
    ['ListTaskPushNotificationConfigs', { taskId: task.id }],
    ['DeleteTaskPushNotificationConfig', { taskId: task.id, id: 'c1' }]
  ] as const
  for (const [method, params] of configs) {
    t.match(await rpc(method, params), { error: { code: -32003 } }, `${method}: PushNotificationNotSupportedError`)
  }
  t.match(await rpc('GetExtendedAgentCard', {}), { error: { code: -32007 } })
  t.match(await a2aRefusal(send(client, { ...userMessage('more'), taskId: task.id })),
    { name: 'UnsupportedOperationError' }, 'an ended task takes no more messages')
  t.match(await a2aRefusal(send(client, { ...userMessage('more'), contextId: task.id })),
    { name: 'UnsupportedOperationError' })
  const list = (extra: object) => rpc('ListTasks', extra)
  t.match(await list({ pageToken: 'nope' }), { error: { code: -32602 } }, 'a page token it never gave')
  t.match(await list({ pageSize: 101 }), { error: { code: -32602 } })
  t.match(await list({ statusTimestampAfter: 'yesterday' }), { error: { code: -32602 } })
  const completed = await list({ status: 'TASK_STATE_COMPLETED' }) as { result?: { tasks: Array<{ id: string }> } }
  t.same(completed.result?.tasks.map((each) => each.id), [task.id])
  const working = await list({ status: 'TASK_STATE_WORKING' }) as { result?: { tasks?: unknown[] } }
  t.same(working.result?.tasks ?? [], [])
  const resumeFrom = await fetch(`${base}/a2a/codex_run`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ALICE}`, 'content-type': 'application/json', 'a2a-version': '1.0', 'last-event-id': 'x'
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'SubscribeToTask', params: { id: task.id } })
  })
  t.match(await resumeFrom.json(), { error: { code: -32602 } }, 'a Last-Event-ID this service never gives')
})

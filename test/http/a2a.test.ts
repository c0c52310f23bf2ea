import t from 'tap'
import { TaskState, type StreamResponse } from '@a2a-js/sdk'
import {
  a2aClient, a2aService, a2aRefusal, allTasks, answerOf, BINDINGS, sendMessage as send, userMessage
} from '../helpers/a2a.js'
import {
  echoed, getRun, heldAgent, isAlive, readPidFile, releaseStep, scenario, standInEnv, tempDir, until
} from '../helpers/index.js'

// The agents as A2A 1.0 agents, driven by the official SDK's client, unmodified, over a listening service and over
// both bindings: a task is a run (same id, store, owner, refusals), its steps stream as status messages, its answer
// is an artifact. test/http/a2a-wire.test.ts speaks the wire without the SDK.

const ALICE = 'secret-a'
const BOB = 'secret-b'

for (const binding of BINDINGS) {
  t.test(`${binding}: SendMessage blocks until the run ends: the text byte for byte, the answer an artifact, ` +
    'the task a run',
  async (t) => {
    const { app, base } = await a2aService(t)
    const client = await a2aClient(base, '/a2a/codex_run', ALICE, binding)
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

  t.test(`${binding}: returnImmediately answers with the task as it starts; GetTask follows it; ` +
    'GET /runs lists it', async (t) => {
    const { app, base } = await a2aService(t)
    const client = await a2aClient(base, '/a2a/claude_run', ALICE, binding)
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

  t.test(`${binding}: SendStreamingMessage: the task, each step as a status message, the answer, then the final status`,
    async (t) => {
      const { base } = await a2aService(t)
      const client = await a2aClient(base, '/a2a/claude_run', ALICE, binding)
      const events: StreamResponse[] = []
      for await (const event of client.sendMessageStream({
        tenant: '', message: userMessage(scenario.toolCalls(2, 10)), configuration: undefined, metadata: undefined
      })) events.push(event)
      t.equal(events[0]?.payload?.$case, 'task', 'the task first')
      const steps = events.filter((event) => event.payload?.$case === 'statusUpdate' &&
        event.payload.value.status?.state === TaskState.TASK_STATE_WORKING)
      t.ok(steps.length >= 2, 'the steps as they came')
      const updates = JSON.stringify(steps.map((step) => step.payload?.value))
      t.match(updates, /"kind":"command"/, 'each with its step as data')
      const artifact = events.find((event) => event.payload?.$case === 'artifactUpdate')
      t.match(artifact?.payload?.value, { artifact: { artifactId: 'answer' } })
      const last = events.at(-1)?.payload
      t.match(last, { $case: 'statusUpdate', value: { status: { state: TaskState.TASK_STATE_COMPLETED } } })
    })

  t.test(`${binding}: a client whose stream broke resubscribes: the task goes on, and so does its stream`,
    async (t) => {
      const { base } = await a2aService(t)
      const client = await a2aClient(base, '/a2a/claude_run', ALICE, binding)
      const dir = tempDir(t)
      const stream = client.sendMessageStream({
        tenant: '', message: userMessage(scenario.gated(dir, 'out:one')), configuration: undefined, metadata: undefined
      })
      const first = await stream.next()
      t.equal(first.value?.payload?.$case, 'task')
      const task = first.value!.payload!.value as { id: string }
      // The client goes: its stream closes, the task does not.
      await stream.return(undefined)
      t.equal((await client.getTask({ tenant: '', id: task.id })).status?.state, TaskState.TASK_STATE_WORKING)
      const again: StreamResponse[] = []
      const resubscribed = client.resubscribeTask({ tenant: '', id: task.id })
      const opening = await resubscribed.next()
      t.match(opening.value?.payload, { $case: 'task', value: { id: task.id } }, 'the task as it is, first')
      releaseStep(dir, 1)
      for await (const event of resubscribed) again.push(event)
      t.match(again.at(-1)?.payload, { value: { status: { state: TaskState.TASK_STATE_COMPLETED } } }, 'to its end')
      t.ok(again.some((event) => event.payload?.$case === 'artifactUpdate'), 'with its answer')
    })

  t.test(`${binding}: CancelTask stops the agent and its tree; an ended task is not cancelable`, async (t) => {
    const { base } = await a2aService(t)
    const client = await a2aClient(base, '/a2a/gemini_run', ALICE, binding)
    const held = heldAgent(t)
    const task = await send(client, userMessage(held.task), true)
    const pid = await readPidFile(held.pidFile)
    const cancelled = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined })
    t.equal(cancelled.status?.state, TaskState.TASK_STATE_CANCELED)
    t.notOk(isAlive(pid), 'the agent is gone')
    t.match(await a2aRefusal(client.cancelTask({ tenant: '', id: task.id, metadata: undefined })),
      { name: 'TaskNotCancelableError' })
  })

  t.test(`${binding}: ownership: another token’s task is not found, its list holds none of them`, async (t) => {
    const { base } = await a2aService(t)
    const alice = await a2aClient(base, '/a2a/codex_run', ALICE, binding)
    const bob = await a2aClient(base, '/a2a/codex_run', BOB, binding)
    const task = await send(alice, userMessage('mine'))
    t.match(await a2aRefusal(bob.getTask({ tenant: '', id: task.id })),
      { name: 'TaskNotFoundError', code: 'RUN_NOT_FOUND' })
    t.match(await a2aRefusal(bob.cancelTask({ tenant: '', id: task.id, metadata: undefined })),
      { name: 'TaskNotFoundError' })
    const listRequest = allTasks()
    t.same((await bob.listTasks(listRequest)).tasks, [])
    t.same((await alice.listTasks(listRequest)).tasks.map((each) => each.id), [task.id])
    const other = await a2aClient(base, '/a2a/claude_run', ALICE, binding)
    t.match(await a2aRefusal(other.getTask({ tenant: '', id: task.id })), { name: 'TaskNotFoundError' },
      'another tool’s agent knows none of this tool’s tasks')
  })

  t.test(`${binding}: ListTasks pages with a cursor, newest first`, async (t) => {
    const { base } = await a2aService(t)
    const client = await a2aClient(base, '/a2a/codex_run', ALICE, binding)
    const ids: string[] = []
    for (let i = 0; i < 5; i++) ids.push((await send(client, userMessage(`task ${i}`))).id)
    const seen: string[] = []
    let pageToken = ''
    do {
      const page = await client.listTasks(allTasks({ pageSize: 2, pageToken }))
      t.ok(page.tasks.length <= 2)
      t.equal(page.totalSize, 5)
      seen.push(...page.tasks.map((task) => task.id))
      pageToken = page.nextPageToken
    } while (pageToken !== '')
    t.same(seen, [...ids].reverse())
  })

  t.test(`${binding}: refusals are A2A errors carrying the service’s code, and start nothing`, async (t) => {
    const { base } = await a2aService(t, { MAX_CODEX_AGENTS: '1' })
    const client = await a2aClient(base, '/a2a/codex_run', ALICE, binding)
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
    // The SDK's REST client keeps ErrorInfo only for A2A's own reasons: the status says what REST's would.
    t.match(full, binding === 'JSONRPC'
      ? {
          rpcCode: -32000,
          code: 'AGENT_LIMIT_REACHED',
          message: /1/,
          info: { domain: 'agent-runner', reason: 'AGENT_LIMIT_REACHED', metadata: { status: '429' } }
        }
      : { statusCode: 429, message: /1/ }, 'a full tool: not now, in the service’s own terms')
    const metrics = await (await fetch(`${base}/metrics`)).text()
    t.match(metrics, /^agent_runner_rejections_total\{tool="codex_run",reason="VALIDATION_ERROR"\} 4$/m,
      'counted as REST’s refusals are')
    t.match(metrics, /^agent_runner_rejections_total\{tool="codex_run",reason="AGENT_LIMIT_REACHED"\} 1$/m)
  })

  t.test(`${binding}: the service’s agent runs the tool the message names, and knows every tool’s tasks`, async (t) => {
    const { base } = await a2aService(t)
    const client = await a2aClient(base, '/a2a', ALICE, binding)
    const task = await send(client, userMessage('hello', { tool: 'gemini_run' }))
    t.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED)
    t.match(task.metadata, { run: { tool: 'gemini_run' } })
    t.equal((await client.getTask({ tenant: '', id: task.id })).id, task.id)
    t.match(await a2aRefusal(send(client, userMessage('hello'))),
      { code: 'VALIDATION_ERROR', message: /metadata\/tool/ })
    const own = await a2aClient(base, '/a2a/codex_run', ALICE, binding)
    t.match(await a2aRefusal(send(own, userMessage('hello', { tool: 'gemini_run' }))), { code: 'VALIDATION_ERROR' },
      'a tool’s agent runs only its tool')
    t.equal((await send(own, userMessage('hello', { tool: 'codex_run' }))).status?.state,
      TaskState.TASK_STATE_COMPLETED, 'naming its own tool is no harm')
  })

  t.test(`${binding}: a message in a task’s context continues its agent’s session, with the same ownership`,
    async (t) => {
      const { base } = await a2aService(t, {}, standInEnv({ HOME: tempDir(t) }))
      const client = await a2aClient(base, '/a2a/claude_run', ALICE, binding)
      const cwd = tempDir(t)
      const first = await send(client, userMessage('write the parser', { cwd }))
      const inContext = (text: string) => ({ ...userMessage(text), contextId: first.contextId })
      const second = await send(client, inContext('--help now its tests'))
      t.equal(second.contextId, first.contextId, 'the same context')
      t.not(second.id, first.id, 'a new task')
      const seen = echoed({ output: answerOf(second) } as Parameters<typeof echoed>[0]) as ReturnType<typeof echoed> & {
        earlier: string[]
      }
      t.same(seen.earlier, ['write the parser'], 'the agent was given its conversation back')
      t.equal(seen.prompt, '--help now its tests', 'the text byte for byte')
      t.equal(seen.cwd, cwd, 'where the session ran')
      const third = await send(client, inContext('and document it'))
      const thirdSeen = echoed({ output: answerOf(third) } as Parameters<typeof echoed>[0]) as unknown as {
        earlier: string[]
      }
      t.same(thirdSeen.earlier, ['write the parser', '--help now its tests'], 'from the context’s latest task')
      const listed = await client.listTasks(allTasks({ contextId: first.contextId }))
      t.same(listed.tasks.map((task) => task.id), [third.id, second.id, first.id], 'the context’s tasks')

      const bob = await a2aClient(base, '/a2a/claude_run', BOB, binding)
      t.match(await a2aRefusal(send(bob, { ...userMessage('mine now'), contextId: first.contextId })),
        { name: 'TaskNotFoundError' }, 'another token’s context is not found')
      const codex = await a2aClient(base, '/a2a/codex_run', ALICE, binding)
      t.match(await a2aRefusal(send(codex, { ...userMessage('x'), contextId: first.contextId })),
        { name: 'TaskNotFoundError' }, 'nor is another tool’s')
      t.match(await a2aRefusal(send(client, { ...userMessage('x', { resume: 'abc' }), contextId: first.contextId })),
        { code: 'VALIDATION_ERROR' }, 'a context is continued by its own session only')
      const held = heldAgent(t)
      const running = await send(client, userMessage(held.task), true)
      t.match(await a2aRefusal(send(client, { ...userMessage('x'), contextId: running.contextId })),
        { name: 'UnsupportedOperationError', message: /still running/ })
      held.release()
      const crush = await a2aClient(base, '/a2a/crush_run', ALICE, binding)
      const plain = await send(crush, userMessage('no sessions here'))
      t.match(await a2aRefusal(send(crush, { ...userMessage('x'), contextId: plain.contextId })),
        { name: 'UnsupportedOperationError', message: /no session/ })
    })
}

import t from 'tap'
import { a2aClient, a2aService, a2aRefusal, sendMessage as send, userMessage } from '../helpers/a2a.js'
import { build, buildLogged, heldAgent, listen, releaseStep, scenario, tempDir, until } from '../helpers/index.js'

// A2A on the wire, without the SDK: requests written from the specification's own examples (JSON-RPC and HTTP+JSON,
// the A2A-Version header, a 0.3 client's request), the cards, SSE frames and their ids, and what is not offered.

const ALICE = 'secret-a'

t.test('cards: each tool’s and the service’s, public, naming the JSON-RPC endpoint and the bearer scheme',
  async (t) => {
    const { app, base } = await a2aService(t)
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
    // Without PUBLIC_URL a card names the Host it was asked by: no cache may hand it to a client of another Host.
    for (const url of ['/.well-known/agent-card.json', '/a2a/codex_run/.well-known/agent-card.json']) {
      const answer = await app.inject({ url, headers: { host: 'elsewhere.example' } })
      t.equal(answer.headers['cache-control'], 'no-store', url)
      t.match(answer.headers['vary'], /\bhost\b/i, url)
      t.match(answer.json(), { supportedInterfaces: [{ url: /^http:\/\/elsewhere\.example\// }] })
    }
    const published = (await a2aService(t, { PUBLIC_URL: 'https://runner.example.com' })).app
    const fixed = await published.inject({
      url: '/.well-known/agent-card.json', headers: { host: 'elsewhere.example' }
    })
    t.equal(fixed.headers['cache-control'], undefined, 'with PUBLIC_URL the card is the same for every Host')
    t.match(fixed.json(), { supportedInterfaces: [{ url: 'https://runner.example.com/a2a' }] })
  })

t.test('plain JSON-RPC: a request without A2A-Version is a 0.3 client’s, refused as the spec says', async (t) => {
  const { base } = await a2aService(t)
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
    const { base } = await a2aService(t, { STREAM_HEARTBEAT_MS: '50' })
    const client = await a2aClient(base, '/a2a/claude_run', ALICE)
    const dir = tempDir(t)
    // Each part a line of claude's stream-json, a step told as it is written; the agent waits at its gate between.
    const said = (text: string) =>
      `out:${JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text }] } })}` as const
    const task = await send(client, userMessage(scenario.gated(dir, said('one'), said('two'))), true)
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
    // The first subscriber reads until its first step, and the third resumes after it.
    const reader = first.body!.getReader()
    let seen = ''
    while (stepsOf(seen).length === 0) seen += new TextDecoder().decode((await reader.read()).value)
    const resumed = await subscribe({ 'last-event-id': stepsOf(seen)[0]! })
    // The agent is silent at its gate until the test releases it: a heartbeat fills the silence (none within 10 s: the
    // stream is dropped and the test fails).
    const noHeartbeat = setTimeout(() => { void reader.cancel() }, 10_000)
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      seen += new TextDecoder().decode(chunk.value)
      if (/: heartbeat/.test(seen)) break
    }
    clearTimeout(noHeartbeat)
    t.match(seen, /: heartbeat/, 'a heartbeat while the agent waited')
    releaseStep(dir, 1)
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      seen += new TextDecoder().decode(chunk.value)
    }
    const [two, three] = await Promise.all([second.text(), resumed.text()])
    t.ok(stepsOf(seen).length > 1, 'steps carry their event ids')
    t.same(stepsOf(two), stepsOf(seen), 'each subscriber got every step')
    t.same(stepsOf(three), stepsOf(seen).slice(1), 'a subscriber resumed after the event it named, missing none')
    t.match(three, /TASK_STATE_COMPLETED/)
    t.match(await a2aRefusal(client.resubscribeTask({ tenant: '', id: task.id }).next()),
      { name: 'UnsupportedOperationError' }, 'an ended task has nothing to subscribe to')
  })

t.test('what is not offered is refused as A2A says: push configs after the message, the extended card, messages ' +
  'to a task', async (t) => {
  const { base } = await a2aService(t)
  const client = await a2aClient(base, '/a2a/codex_run', ALICE)
  const task = await send(client, userMessage('done'))
  const rpc = (method: string, params: object) => fetch(`${base}/a2a/codex_run`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALICE}`, 'content-type': 'application/a2a+json', 'a2a-version': '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'x', method, params })
  }).then((response) => response.json() as Promise<{ error?: { code: number } }>)
  // An ended task has nothing more to tell, and this one never had a push config (test/http/a2a-push.test.ts).
  const configs = [
    ['CreateTaskPushNotificationConfig', { taskId: task.id, url: 'https://example.com/hook' }, { error: { code: -32004 } }],
    ['GetTaskPushNotificationConfig', { taskId: task.id, id: 'c1' }, { error: { code: -32001 } }],
    ['ListTaskPushNotificationConfigs', { taskId: task.id }, { result: {} }],
    ['DeleteTaskPushNotificationConfig', { taskId: task.id, id: 'c1' }, { error: { code: -32001 } }]
  ] as const
  for (const [method, params, answer] of configs) t.match(await rpc(method, params), answer, method)
  t.match(await rpc('GetExtendedAgentCard', {}), { error: { code: -32007 } })
  t.match(await a2aRefusal(send(client, { ...userMessage('more'), taskId: task.id })),
    { name: 'UnsupportedOperationError' }, 'an ended task takes no more messages')
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

t.test('plain HTTP+JSON: the specification’s resources, A2A’s error bodies with the service’s code', async (t) => {
  const { base } = await a2aService(t, { MAX_CODEX_AGENTS: '1' })
  const headers = { authorization: `Bearer ${ALICE}`, 'content-type': 'application/a2a+json', 'a2a-version': '1.0' }
  const message = { messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'hello' }] }
  const sent = await fetch(`${base}/a2a/codex_run/message:send`, {
    method: 'POST', headers, body: JSON.stringify({ message })
  })
  t.equal(sent.status, 200)
  t.match(sent.headers.get('content-type'), /^application\/a2a\+json/)
  const { task } = await sent.json() as { task: { id: string } }
  t.match(task, { id: String, status: { state: 'TASK_STATE_COMPLETED' }, artifacts: [{ artifactId: 'answer' }] })
  const got = await (await fetch(`${base}/a2a/codex_run/tasks/${task.id}?historyLength=0`, { headers })).json()
  t.match(got, { id: task.id, status: { state: 'TASK_STATE_COMPLETED' } })
  t.notOk((got as { history?: unknown[] }).history?.length, 'historyLength 0: no message')
  const listed = await (await fetch(`${base}/a2a/codex_run/tasks?pageSize=10`, { headers })).json() as {
    tasks: Array<{ id: string, artifacts?: unknown[] }>
  }
  t.same(listed.tasks.map((each) => each.id), [task.id])
  t.notOk(listed.tasks[0]!.artifacts?.length, 'a list has no artifacts unless asked for')
  const withArtifacts = await (await fetch(`${base}/a2a/codex_run/tasks?includeArtifacts=true`, { headers })).json()
  t.match(withArtifacts, { tasks: [{ artifacts: [{ artifactId: 'answer' }] }] })

  const missing = await fetch(`${base}/a2a/codex_run/tasks/no-such-task`, { headers })
  t.equal(missing.status, 404)
  t.match(await missing.json(), {
    error: {
      code: 404,
      status: 'NOT_FOUND',
      details: [{ reason: 'TASK_NOT_FOUND', domain: 'a2a-protocol.org', metadata: { code: 'RUN_NOT_FOUND' } }]
    }
  })
  const unversioned = await fetch(`${base}/a2a/codex_run/tasks/${task.id}`, {
    headers: { authorization: headers.authorization }
  })
  t.equal(unversioned.status, 400)
  t.match(await unversioned.json(), { error: { details: [{ reason: 'VERSION_NOT_SUPPORTED' }] } })
  t.equal((await fetch(`${base}/a2a/codex_run/tasks/${task.id}:frobnicate`, { method: 'POST', headers })).status, 404,
    'a verb the binding does not have')

  const held = heldAgent(t)
  const running = await fetch(`${base}/a2a/codex_run/message:send`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      message: { ...message, messageId: 'm2', parts: [{ text: held.task }] }, configuration: { returnImmediately: true }
    })
  })
  const { task: heldTask } = await running.json() as { task: { id: string } }
  t.match(heldTask, { status: { state: 'TASK_STATE_WORKING' } })
  const full = await fetch(`${base}/a2a/codex_run/message:send`, {
    method: 'POST', headers, body: JSON.stringify({ message: { ...message, messageId: 'm3' } })
  })
  t.equal(full.status, 429, 'the status REST answers a full tool with')
  t.match(await full.json(), {
    error: {
      code: 429, details: [{ reason: 'AGENT_LIMIT_REACHED', domain: 'agent-runner', metadata: { status: '429' } }]
    }
  })
  held.release()
  await until(
    () => fetch(`${base}/a2a/codex_run/tasks/${heldTask.id}`, { headers }).then((response) => response.json()),
    (state) => (state as { status: { state: string } }).status.state === 'TASK_STATE_COMPLETED', 10_000, 'its slot back'
  )

  const stream = await fetch(`${base}/a2a/codex_run/message:stream`, {
    method: 'POST', headers, body: JSON.stringify({ message: { ...message, messageId: 'm4' } })
  })
  t.equal(stream.headers.get('content-type'), 'text/event-stream')
  const frames = (await stream.text()).split('\n\n').filter((frame) => /^data: /m.test(frame))
  const events = frames.map((frame) => JSON.parse(frame.slice(frame.indexOf('data: ') + 6)) as Record<string, unknown>)
  t.ok(events[0]?.['task'], 'the task first')
  t.match(events.at(-1), { statusUpdate: { status: { state: 'TASK_STATE_COMPLETED' } } }, 'the final status last')
})

t.test('plain HTTP+JSON: a task’s subscription, push configs and the extended card, as the binding names them',
  async (t) => {
    const { base } = await a2aService(t)
    const headers = { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json', 'a2a-version': '1.0' }
    const client = await a2aClient(base, '/a2a/claude_run', ALICE, 'HTTP+JSON')
    const dir = tempDir(t)
    const task = await send(client, userMessage(scenario.gated(dir, 'out:one')), true)
    const tasks = `${base}/a2a/claude_run/tasks/${task.id}`
    const byGet = await fetch(`${tasks}:subscribe`, { headers })
    const byPost = await fetch(`${tasks}:subscribe`, { method: 'POST', headers })
    t.equal(byGet.headers.get('content-type'), 'text/event-stream')
    releaseStep(dir, 1)
    for (const text of [await byGet.text(), await byPost.text()]) {
      t.match(text, /^data: \{"task":/m, 'the task first')
      t.match(text, /^id: \d+\.\d+$/m, 'its steps with their ids')
      t.match(text, /"state":"TASK_STATE_COMPLETED"/, 'its end')
    }
    const configs = `${tasks}/pushNotificationConfigs`
    const answers = [
      [await fetch(configs, { method: 'POST', headers, body: JSON.stringify({ url: 'https://example.com/hook' }) }), 400],
      [await fetch(configs, { headers }), 200],
      [await fetch(`${configs}/c1`, { headers }), 404],
      [await fetch(`${configs}/c1`, { method: 'DELETE', headers }), 404]
    ] as const
    for (const [answer, status] of answers) t.equal(answer.status, status, `${answer.url}: ${status}`)
    // ProtoJSON leaves an empty list out.
    t.same(await answers[1][0].json(), {}, 'a task sent without a push config has none')
    const card = await fetch(`${base}/a2a/claude_run/extendedAgentCard`, { headers })
    t.equal(card.status, 400)
    t.match(await card.json(), { error: { details: [{ reason: 'EXTENDED_AGENT_CARD_NOT_CONFIGURED' }] } })
  })

t.test('a failure nobody meant (a store gone) is an internal error on either binding, its details only in the log',
  async (t) => {
    const { app, lines } = await buildLogged(t, { API_TOKENS: 'alice:secret-a' })
    const base = await listen(t, app)
    const client = await a2aClient(base, '/a2a/codex_run', ALICE)
    const task = await send(client, userMessage('hello'))
    const headers = { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json', 'a2a-version': '1.0' }
    const runs = app.runs
    const state = runs.state.bind(runs)
    runs.state = () => Promise.reject(new Error('disk on fire'))
    t.teardown(() => { runs.state = state })
    const rpc = await fetch(`${base}/a2a/codex_run`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'GetTask', params: { id: task.id } })
    })
    t.equal(rpc.status, 500)
    const rpcBody = await rpc.text()
    t.match(JSON.parse(rpcBody), { id: 3, error: { code: -32603, message: 'Internal server error' } })
    const rest = await fetch(`${base}/a2a/codex_run/tasks/${task.id}`, { headers })
    t.equal(rest.status, 500)
    const restBody = await rest.text()
    t.match(JSON.parse(restBody), { error: { code: 500, message: 'Internal server error' } })
    t.notMatch(rpcBody + restBody, /disk on fire/, 'nothing of it in the answers')
    t.match(lines.join(''), /disk on fire/, 'all of it in the log')
    runs.state = state

    // A stream whose task's events cannot be read any more ends with an error event.
    const dir = tempDir(t)
    const gated = await send(client, userMessage(scenario.gated(dir, 'out:one')), true)
    const feed = runs.feed.bind(runs)
    runs.feed = () => Promise.reject(new Error('store gone'))
    t.teardown(() => { runs.feed = feed })
    for (const [url, init] of [
      [`${base}/a2a/codex_run`, {
        method: 'POST',
        body: JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'SubscribeToTask', params: { id: gated.id } })
      }],
      [`${base}/a2a/codex_run/tasks/${gated.id}:subscribe`, {}]
    ] as const) {
      const text = await (await fetch(url, { ...init, headers })).text()
      t.match(text, /^data: .*"task"/m, 'the task came first')
      t.match(text, /^event: error\ndata: .*Internal server error/m, 'then the error, as the stream’s last event')
      t.notMatch(text, /store gone/)
    }
    releaseStep(dir, 1)
  })

t.test('a JSON-RPC request the transport cannot read is answered by the transport’s own errors', async (t) => {
  const { base } = await a2aService(t)
  const headers = { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json', 'a2a-version': '1.0' }
  const post = async (body: unknown) => (await fetch(`${base}/a2a/codex_run`, {
    method: 'POST', headers, body: JSON.stringify(body)
  })).json()
  t.match(await post({ jsonrpc: '1.0', id: 1, method: 'GetTask', params: {} }), { error: { code: -32602 } })
  t.match(await post({ jsonrpc: '2.0', id: 1, method: 'Nope', params: {} }), { error: { code: -32601 } })
  t.match(await post({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: [] }), { error: { code: -32602 } })
  t.match(await post({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: 'x' } }),
    { error: { code: -32602, message: 'params/message: an object' } })
  const garbled = await fetch(`${base}/a2a/codex_run`, { method: 'POST', headers, body: '{"jsonrpc": "2.0", "id": 1,' })
  t.equal(garbled.status, 200, 'no JSON: the transport’s own refusal, not the REST API’s')
  t.match(await garbled.json(), { jsonrpc: '2.0', id: null, error: { code: -32602 } })
  const poisoned = await fetch(`${base}/a2a/codex_run`, {
    method: 'POST', headers, body: '{"jsonrpc": "2.0", "id": 1, "__proto__": {"admin": true}}'
  })
  t.equal(poisoned.status, 400, 'a prototype poisoning is refused before any transport, as everywhere')
  const restGarbled = await fetch(`${base}/a2a/codex_run/message:send`, {
    method: 'POST', headers, body: '{"message":'
  })
  t.equal(restGarbled.status, 400)
  t.match(await restGarbled.json(), { error: { details: [{ reason: 'INVALID_PARAMS' }] } })
  const notAList = { message: { messageId: 'm', parts: 5 } }
  t.match(await post({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: notAList }),
    { error: { code: -32602, data: [{ metadata: { code: 'VALIDATION_ERROR' } }] } }, 'parts that are no list: no text')
  // Shapes the SDK's converters would read as objects: refused as malformed params on both bindings, never a 500.
  const malformed = [
    { message: { messageId: 'm', role: 'ROLE_USER', parts: [null] } },
    { message: { messageId: 'm', role: 'ROLE_USER', parts: [5] } },
    { message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'x' }], metadata: 5 } },
    { message: null },
    { message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'x' }] }, configuration: 5 },
    {
      message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'x' }] },
      configuration: { taskPushNotificationConfig: 5 }
    }
  ]
  for (const params of malformed) {
    t.match(await post({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params }), { error: { code: -32602 } },
      `JSON-RPC: ${JSON.stringify(params)}`)
    const rest = await fetch(`${base}/a2a/codex_run/message:send`, {
      method: 'POST', headers, body: JSON.stringify(params)
    })
    t.equal(rest.status, 400, `HTTP+JSON: ${JSON.stringify(params)}`)
  }
})

import t, { type Test } from 'tap'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { FastifyInstance } from 'fastify'
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { constAsEnum } from '../helpers/json-schema.js'
import {
  build, createRun, heldAgent, isAlive, listen, readPidFile, refused, releaseStep, runTool, scenario, settled, tempDir,
  until
} from '../helpers/index.js'
import { realClaude } from '../helpers/real-clis/claude.js'

// The agents over MCP, driven by the SDK's own client on a listening server: the same tools, slots and rules as REST.

const bases = new WeakMap<FastifyInstance, Promise<string>>()

async function connect(t: Test, app: FastifyInstance, headers: Record<string, string> = {}): Promise<Client> {
  if (!bases.has(app)) bases.set(app, listen(t, app))
  const client = new Client({ name: 'agent-runner-test', version: '0.0.0' })
  const transport = new StreamableHTTPClientTransport(
    new URL(`${await bases.get(app)!}/mcp`), { requestInit: { headers } }
  )
  await client.connect(transport)
  t.teardown(() => client.close())
  return client
}

// Each test has its own service (and the real Claude Code its own HOME): they run side by side.
t.jobs = 3

t.test('tools/list: one tool per agent, described by the OpenAPI document’s own schemas, ' +
  'read as JSON Schema 2020-12', async (t) => {
  const app = await build(t)
  const client = await connect(t, app)
  const { tools } = await client.listTools()
  const rest = (await app.inject({ method: 'GET', url: '/tools' })).json().tools.map(
    (tool: { name: string }) => tool.name
  )
  t.same(tools.map((tool) => tool.name), rest, 'the same tools as GET /tools')
  const { components } = app.swagger() as unknown as {
    components: { schemas: Record<string, Record<string, unknown>> }
  }
  const { examples: _examples, ...documented } = components.schemas['RunParams']!
  // Strict: a draft-07 keyword (`dependencies`) is an error in 2020-12, not a rule silently dropped.
  const ajv = new Ajv2020({ strict: true, allErrors: true })
  const byDocument = ajv.compile(documented)
  for (const tool of tools) {
    t.same(constAsEnum(tool.inputSchema), documented, `${tool.name}: the document's RunParams, word for word`)
    t.match(tool.annotations, { readOnlyHint: false, idempotentHint: false, openWorldHint: true })
  }
  const byHost = new Ajv2020({ strict: true, allErrors: true }).compile(tools[0]!.inputSchema)
  const verdicts: Array<[Record<string, unknown>, boolean]> = [
    [{ task: 'x' }, true],
    [{ task: 'x', timeout: 60, cwd: '/tmp', events: 'steps' }, true],
    [{ task: 'x', wsl_distro: 'Ubuntu', wsl_user: 'dev' }, true],
    [{ task: 'x', wsl_user: 'dev' }, false],
    [{ task: 'x', timeout: 0 }, false],
    [{ timeout: 60 }, false],
    [{ task: 'x', extra: 1 }, false]
  ]
  for (const [args, valid] of verdicts) {
    t.equal(byHost(args), valid, `${JSON.stringify(args)}: ${valid ? 'valid' : 'invalid'} to an MCP host`)
    t.equal(byDocument(args), valid, `${JSON.stringify(args)}: and to an OpenAPI client`)
    const rest = await app.inject({
      method: 'POST', url: '/tools/crush_run', payload: { ...args, cwd: '/no/such/dir' }
    })
    t.equal(rest.json().code === 'VALIDATION_ERROR', !valid, `${JSON.stringify(args)}: and to the service`)
  }

  // The output: the document's RunResult or its ErrorResponse, each a tool call's structured content.
  const byOutput = new Ajv2020({ strict: true, allErrors: true }).compile(tools[0]!.outputSchema!)
  const result = await client.callTool({ name: 'crush_run', arguments: { task: 'x' } })
  t.ok(byOutput(result.structuredContent), 'a result matches the output schema')
  const refusal = await client.callTool({ name: 'crush_run', arguments: { task: '' } })
  t.ok(byOutput(refusal.structuredContent), 'a refusal too')
  t.notOk(
    byOutput({ ...(result.structuredContent as object), tool: 'nope_run' }), 'a tool the service does not run does not'
  )
  t.notOk(byOutput({ ...(refusal.structuredContent as object), code: 'NOT_A_CODE' }), 'nor a code not in the catalog')
})

t.test('tools/call: the agent’s answer as text, the REST result as structuredContent', async (t) => {
  const app = await build(t)
  const client = await connect(t, app)
  const task = '--flag; $(id) "quoted"'
  const result = await client.callTool({ name: 'crush_run', arguments: { task } })
  t.equal(result.isError, false)
  const structured = result.structuredContent as Record<string, any>
  t.match(structured, { tool: 'crush_run', ok: true, exit_code: 0, command: ['crush', 'run', '--', task] })
  t.same(result.content, [{ type: 'text', text: structured['output'] }])
  t.equal(JSON.parse(structured['output']).prompt, task, 'the task byte for byte')
  const failed = await client.callTool({ name: 'crush_run', arguments: { task: scenario.fail() } })
  t.equal(failed.isError, true, 'a run that failed is a tool error, with its result')
  t.match(failed.structuredContent, { ok: false, exit_code: 1 })
})

t.test('refusals are tool errors with the REST message: bad arguments, unknown tool, the limit', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '1' })
  const client = await connect(t, app)
  for (const args of [{ task: '' }, { task: 'x', extra: 1 }, { task: 'x', timeout: 0 }, { task: 'x', wsl_user: 'u' }]) {
    const invalid = await client.callTool({ name: 'crush_run', arguments: args })
    const rest = await refused(app, 'crush_run', args)
    t.equal(rest.status, 400)
    t.match(
      invalid, { isError: true, content: [{ type: 'text', text: rest.body.message }] },
      `${JSON.stringify(args)}: word for word the REST message`
    )
    t.same(invalid.structuredContent, rest.body, `${JSON.stringify(args)}: the REST error object, code included`)
  }
  t.match(await client.callTool({ name: 'nope_run', arguments: { task: 'x' } }), {
    isError: true,
    content: [{ text: 'Unknown tool: nope_run' }],
    structuredContent: {
      statusCode: 400, error: 'Bad Request', code: 'VALIDATION_ERROR', message: 'Unknown tool: nope_run'
    }
  })
  for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
    t.match(
      await client.callTool({ name, arguments: { task: 'x' } }),
      { isError: true, content: [{ text: `Unknown tool: ${name}` }] },
      `${name}: not a tool, whatever the prototype holds`
    )
  }

  const held = heldAgent(t)
  const holder = runTool(app, 'crush_run', { task: held.task })
  await readPidFile(held.pidFile)
  const limited = await client.callTool({ name: 'crush_run', arguments: { task: 'x' } })
  t.match(
    limited, { isError: true, content: [{ type: 'text', text: 'Limite de 1 agent atteinte' }] },
    'MCP and REST compete for the same slots'
  )
  t.same(
    limited.structuredContent,
    { statusCode: 429, error: 'Too Many Requests', code: 'AGENT_LIMIT_REACHED', message: 'Limite de 1 agent atteinte' },
    'a code a program branches on'
  )
  held.release()
  t.match(await holder, { ok: true }, 'the REST run holding the slot ends normally')
})

t.test('progress shows what the agent does, as lines people read, for the agents that report steps; ' +
  'output on request', async (t) => {
  const app = await build(t)
  const client = await connect(t, app)
  const progressOf = async (args: Record<string, unknown>) => {
    const progress: string[] = []
    await client.callTool({
      name: 'claude_run', arguments: { task: scenario.shell('ls', '/no/such/dir'), ...args }
    }, undefined, {
      onprogress: (notification) => progress.push(notification.message ?? '')
    })
    return progress.join('')
  }
  const steps = await progressOf({})
  t.match(steps, /^\$ ls \/no\/such\/dir\n/m, 'the command as it starts')
  t.match(steps, /^\$ ls \/no\/such\/dir \(exit 2\)$/m, 'and as it ends, with its exit code')
  t.notMatch(steps, /"type":/, 'no raw JSON by default')
  t.match(await progressOf({ events: 'output' }), /^\{"type":"system"/, 'the raw output when asked')
  const both = await progressOf({ events: 'both' })
  t.ok(both.includes('"type":"assistant"') && both.includes('(exit 2)'), 'or both')
})

t.test('progress carries the output before the result; cancelling stops the agent and frees the slot', async (t) => {
  const app = await build(t)
  const client = await connect(t, app)
  const progress: string[] = []
  let resultAt = 0
  // Each line is written once the one before has come as progress: output held back until the result never ends.
  const steps = tempDir(t)
  const task = scenario.gated(steps, 'out:tick-1', 'out:tick-2', 'out:tick-3')
  const result = await client.callTool({ name: 'crush_run', arguments: { task } }, undefined, {
    onprogress: (notification) => {
      progress.push(notification.message ?? '')
      releaseStep(steps, progress.join('').split('\n').length - 1)
    },
    resetTimeoutOnProgress: true
  })
  resultAt = progress.length
  t.ok(progress.length >= 3, `${progress.length} progress notifications while it ran`)
  t.match(progress.join(''), /^tick-1\ntick-2\ntick-3\n/, 'the output as it came')
  t.equal(resultAt, progress.length, 'all before the result')
  t.match(result.structuredContent, { ok: true })

  const pidFile = join(tempDir(t), 'agent.pid')
  const controller = new AbortController()
  const call = client.callTool(
    { name: 'crush_run', arguments: { task: scenario.drip(1000, 50, pidFile) } }, undefined,
    { signal: controller.signal }
  )
  const agent = await readPidFile(pidFile)
  controller.abort()
  await t.rejects(call)
  const after = await until(
    () => ({ alive: isAlive(agent), slots: app.slots.inUse('crush_run') }),
    (state) => !state.alive && state.slots === 0, 10_000, 'the agent to stop and its slot to come back'
  )
  t.same(after, { alive: false, slots: 0 }, 'the agent stopped and its slot came back')
})

t.test('the same door as /tools: a token, and on loopback without tokens the same Host and Origin rules', async (t) => {
  const guarded = await build(t, { API_TOKENS: 'alice:alice-secret' })
  await t.rejects(connect(t, guarded), /401|Unauthorized/i, 'no token: refused')
  await t.rejects(connect(t, guarded, { authorization: 'Bearer wrong' }), /401|Unauthorized/i, 'a wrong token: refused')
  const client = await connect(t, guarded, { authorization: 'Bearer alice-secret' })
  t.ok((await client.listTools()).tools.length > 0, 'the right token: served')
  const open = await build(t)
  await t.rejects(connect(t, open, { origin: 'https://attacker.example' }), /403|ORIGIN_NOT_ALLOWED/, 'a foreign Origin: refused')
})

t.test('a notifications/cancelled in another POST (stateless) stops the call it names', async (t) => {
  const app = await build(t)
  const base = await listen(t, app)
  const pidFile = join(tempDir(t), 'agent.pid')
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
  const call = fetch(`${base}/mcp`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 42,
      method: 'tools/call',
      params: { name: 'crush_run', arguments: { task: scenario.drip(1000, 50, pidFile) } }
    })
  })
  const agent = await readPidFile(pidFile)
  const cancelled = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers,
    body: JSON.stringify([
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 42, reason: 'changed my mind' } }
    ])
  })
  t.equal(cancelled.status, 202)
  const after = await until(
    () => ({ alive: isAlive(agent), slots: app.slots.inUse('crush_run') }),
    (state) => !state.alive && state.slots === 0, 10_000, 'the named call to stop'
  )
  t.same(after, { alive: false, slots: 0 }, 'the agent stopped and its slot came back')
  const answered = await (await call).text()
  t.notMatch(answered, /"id":42/, 'and the cancelled request got no answer, as MCP says')
})

t.test('a call cancelled while it waits for a slot ends its response, unanswered, and never starts', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '1' })
  const base = await listen(t, app)
  const held = heldAgent(t)
  const holder = await createRun(app, { tool: 'crush_run', task: held.task })
  await readPidFile(held.pidFile)
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
  const waiting = fetch(`${base}/mcp`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 9,
      method: 'tools/call',
      params: { name: 'crush_run', arguments: { task: 'never', queue_timeout: 120 } }
    })
  }).then((response) => response.text())
  await until(() => app.slotQueue.queued('crush_run'), (queued) => queued === 1, 10_000, 'the call to wait')
  const cancelled = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 9 } })
  })
  t.equal(cancelled.status, 202)
  t.notMatch(await waiting, /"id":9/, 'its response ended, with no answer, as MCP says')
  t.equal(app.slotQueue.queued('crush_run'), 0, 'its place given up')
  held.release()
  await settled(app, holder.id)
})

t.test('two calls under one id: a cancellation of that id reaches both, ' +
  'the one that ended first displaces nothing', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '2' })
  const base = await listen(t, app)
  const dir = tempDir(t)
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
  const callWithId7 = (task: string) => fetch(`${base}/mcp`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'crush_run', arguments: { task } }
    })
  })
  const long = callWithId7(scenario.drip(1000, 50, join(dir, 'long.pid')))
  const agent = await readPidFile(join(dir, 'long.pid'))
  // A second call under the same id comes and goes while the first runs.
  t.match(await (await callWithId7('quick')).text(), /"isError":false/)
  const cancelled = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7 } })
  })
  t.equal(cancelled.status, 202)
  t.same(
    await until(() => isAlive(agent), (alive) => !alive, 10_000, 'the first call to stop'), false,
    'the first call was still reachable'
  )
  await (await long).text().catch(() => '')
})

t.test('the real Claude Code, as an MCP client, connects with the token and fails without it', async (t) => {
  const app = await build(t, { API_TOKENS: 'alice:alice-secret' })
  const base = await listen(t, app)
  const home = tempDir(t)
  const env = { HOME: home, CLAUDE_CONFIG_DIR: join(home, '.claude'), PATH: process.env['PATH'], LANG: 'C.UTF-8' }
  const bin = await realClaude()
  const claude = (...args: string[]) => promisify(execFile)(bin, args, { env, cwd: home, timeout: 60_000 })
  await claude(
    'mcp', 'add', '--transport', 'http', 'agent-runner', `${base}/mcp`, '--header', 'Authorization: Bearer alice-secret'
  )
  await claude('mcp', 'add', '--transport', 'http', 'no-token', `${base}/mcp`)
  const { stdout } = await claude('mcp', 'list')
  t.match(stdout, /agent-runner: .*\/mcp \(HTTP\) - ✔ Connected/, 'with the token: connected')
  t.notMatch(stdout, /no-token: .* - ✔ Connected/, 'without it: not connected')
})

t.test('GET and DELETE /mcp answer 405 with Allow: POST: ' +
  'a stateless endpoint has no stream to open nor session to end', async (t) => {
  const app = await build(t)
  for (const method of ['GET', 'DELETE'] as const) {
    const answer = await app.inject({ method, url: '/mcp' })
    t.equal(answer.statusCode, 405, method)
    t.equal(answer.headers['allow'], 'POST', `${method}: Allow says what is`)
    t.same(answer.json(), {
      statusCode: 405,
      error: 'Method Not Allowed',
      code: 'METHOD_NOT_ALLOWED',
      message: `${method} /mcp: this MCP endpoint keeps no session and opens no stream of its own; ` +
        'send JSON-RPC with POST'
    })
  }
})

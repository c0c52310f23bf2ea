import t from 'tap'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import {
  build, call, echoed, linesIn, listen, ndjson, openStream, refused, releaseStep, runTool, scenario, tempDir,
  type RunEvent
} from '../helpers/index.js'

const hostileTasks = [
  '--help',
  '-c /etc',
  '-p --output-format text',
  '"double" and \'single\' quotes',
  '$(touch /tmp/agent-runner-pwned) `touch /tmp/agent-runner-pwned`',
  'a; rm -rf / ; echo done && false || true | cat > /dev/null',
  'line one\nline two\r\n\ttabbed',
  'unicode: héllo 日本語 🚀 \u202e',
  '  leading and trailing spaces  ',
  '*  ?  [a-z]  ~  $HOME  %PATH%  !'
]

t.test('the task reaches each agent byte for byte, never as a flag: crush as one argv element, ' +
  'claude on its stdin', async (t) => {
  const app = await build(t, {
    MAX_CRUSH_AGENTS: String(hostileTasks.length), MAX_CLAUDE_AGENTS: String(hostileTasks.length)
  })
  // All at once: each run is its own process, and nothing here depends on their order.
  const [crush, claude] = await Promise.all(
    (['crush_run', 'claude_run'] as const).map(
      (tool) => Promise.all(hostileTasks.map((task) => runTool(app, tool, { task })))
    )
  )
  hostileTasks.forEach((task, index) => {
    t.same(echoed(crush![index]!).argv, ['run', '--', task], `crush argv for ${JSON.stringify(task)}`)
    t.equal(echoed(crush![index]!).prompt, task)
    t.same(crush![index]!.command, ['crush', 'run', '--', task])
    t.same(
      echoed(claude![index]!).argv,
      ['-p', '--output-format', 'stream-json', '--verbose', '--permission-mode', 'bypassPermissions'],
      `claude argv for ${JSON.stringify(task)}: no task in it`
    )
    t.equal(echoed(claude![index]!).prompt, task)
  })
  t.notOk(existsSync('/tmp/agent-runner-pwned'), 'no shell ran the task')
})

t.test('a successful crush run answers 200 with the whole result', async (t) => {
  const app = await build(t)
  const { status, body, headers } = await call(app, 'POST', '/tools/crush_run', { body: { task: 'hello' } })
  t.equal(status, 200)
  t.match(headers['x-request-id'], /^[0-9a-f-]{36}$/)
  t.match(body, {
    tool: 'crush_run',
    ok: true,
    exit_code: 0,
    signal: null,
    timed_out: false,
    stop_reason: null,
    duration_ms: Number,
    output_truncated: false,
    agent_report: null
  })
  t.equal(body.output_bytes, Buffer.byteLength(body.output), 'output_bytes counts what was written')
})

t.test('a failing agent still answers 200, with its exit code and its own message', async (t) => {
  const app = await build(t)
  const body = await runTool(app, 'crush_run', { task: scenario.fail() })
  t.match(body, { ok: false, exit_code: 1, signal: null, timed_out: false })
  t.match(body.output, /^ERROR something failed$/m)
})

t.test('an agent killed by a signal reports the signal and a null exit code', async (t) => {
  const app = await build(t)
  const body = await runTool(app, 'crush_run', { task: scenario.killSelf('SIGKILL') })
  t.match(body, { ok: false, exit_code: null, signal: 'SIGKILL', timed_out: false, stop_reason: null })
})

t.test('the agent runs in cwd', async (t) => {
  const dir = tempDir(t)
  const app = await build(t)
  t.equal(echoed(await runTool(app, 'crush_run', { task: 'where', cwd: dir })).cwd, dir)
  t.equal(echoed(await runTool(app, 'claude_run', { task: 'where', cwd: dir })).cwd, dir)
})

t.test('stdout and stderr are merged in arrival order', async (t) => {
  const app = await build(t)
  const base = await listen(t, app)
  // Each write waits until the one before has come out of the service: their order of arrival is known.
  const steps = tempDir(t)
  const response = await openStream(base, 'crush_run', {
    task: scenario.gated(steps, 'out:out-1', 'err:err-2', 'out:out-3')
  })
  const events: RunEvent[] = []
  for await (const event of ndjson(response.body!)) {
    events.push(event)
    if (event.type === 'output') releaseStep(steps, linesIn(events))
  }
  t.match(events.at(-1), { type: 'result', result: { output: 'out-1\nerr-2\nout-3\ngated\n' } })
})

t.test('invalid UTF-8 from the agent does not break the response', async (t) => {
  const app = await build(t)
  const body = await runTool(app, 'crush_run', { task: scenario.invalidUtf8() })
  t.match(body.output, /^a\uFFFD\uFFFD\uFFFD\(b$/m)
  t.equal(body.output_bytes, 7 + Buffer.byteLength('wrote invalid utf-8\n'))
})

t.test('huge output keeps exactly its head and its tail, with how much was left out between', async (t) => {
  const limit = 65536
  const app = await build(t, { AGENT_OUTPUT_LIMIT_BYTES: String(limit) })
  const written = 20 * 1024 * 1024
  const total = written + Buffer.byteLength('flooded\n')
  const body = await runTool(app, 'crush_run', { task: scenario.flood(written) })
  t.equal(body.ok, true)
  t.equal(body.output_truncated, true)
  t.equal(body.output_bytes, total)
  // The first and the last half of the limit, byte for byte (src/process/head-tail-buffer.ts), and the count between.
  const tail = `${'x'.repeat(limit / 2 - Buffer.byteLength('flooded\n'))}flooded\n`
  t.equal(body.output, `${'x'.repeat(limit / 2)}\n[… ${total - limit} bytes omitted by agent-runner …]\n${tail}`)
})

t.test('claude: the answer text becomes output and the report its own object', async (t) => {
  const app = await build(t)
  const body = await runTool(app, 'claude_run', { task: scenario.sleep(1) })
  t.equal(body.output, 'slept 1')
  t.match(body, {
    ok: true,
    exit_code: 0,
    agent_report: {
      is_error: false,
      subtype: 'success',
      session_id: /^[0-9a-f-]{36}$/,
      num_turns: 2,
      total_cost_usd: 0.0123,
      duration_ms: Number
    }
  })
})

t.test('claude exiting 0 with is_error is not ok', async (t) => {
  const app = await build(t)
  const body = await runTool(app, 'claude_run', { task: scenario.isError() })
  t.match(body, { ok: false, exit_code: 0, output: 'API Error: 529 overloaded', agent_report: { is_error: true } })
})

t.test('extra arguments and the permission mode come from the configuration', async (t) => {
  const app = await build(t, {
    CRUSH_EXTRA_ARGS: '["--quiet"]',
    CLAUDE_EXTRA_ARGS: '["--model","sonnet"]',
    CLAUDE_PERMISSION_MODE: 'acceptEdits'
  })
  t.same(echoed(await runTool(app, 'crush_run', { task: 'x' })).argv, ['run', '--quiet', '--', 'x'])
  t.same(echoed(await runTool(app, 'claude_run', { task: 'x' })).argv, [
    '-p', '--output-format', 'stream-json', '--verbose', '--permission-mode', 'acceptEdits', '--model', 'sonnet'
  ])
})

t.test('a missing binary answers 503 AGENT_NOT_INSTALLED and frees the slot', async (t) => {
  const app = await build(t, { CRUSH_BIN: 'crush-not-installed-here', MAX_CRUSH_AGENTS: '1' })
  for (let attempt = 0; attempt < 2; attempt++) {
    const { status, body } = await refused(app, 'crush_run', { task: 'x' })
    t.equal(status, 503)
    t.match(body, { statusCode: 503, code: 'AGENT_NOT_INSTALLED', message: /crush-not-installed-here/ })
    t.equal(app.slots.inUse('crush_run'), 0)
  }
})

t.test('a binary that cannot be executed answers 503 AGENT_SPAWN_FAILED', async (t) => {
  const app = await build(t, { CRUSH_BIN: join(tempDir(t)) })
  const { status, body } = await refused(app, 'crush_run', { task: 'x' })
  t.equal(status, 503)
  t.match(body, { code: 'AGENT_SPAWN_FAILED' })
  t.equal(app.slots.inUse('crush_run'), 0)
})

t.test('an answer longer than the output a run keeps comes back whole: read as the output came, ' +
  'not from what was kept', async (t) => {
  const app = await build(t, { AGENT_OUTPUT_LIMIT_BYTES: '65536' })
  const chars = 200_000
  for (const tool of ['claude_run', 'codex_run', 'gemini_run', 'opencode_run'] as const) {
    const result = await runTool(app, tool, { task: scenario.longAnswer(chars) })
    t.match(result, { ok: true, output_truncated: true }, `${tool}: its raw output was cut in the middle`)
    t.equal(result.output.length, chars, `${tool}: the answer, whole`)
    t.ok(
      result.output.startsWith('ANSWER-HEAD-') && result.output.endsWith('-ANSWER-TAIL'),
      `${tool}: from its start to its end`
    )
  }
})

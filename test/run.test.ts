import t from 'tap'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { build, echoed, post, tempDir } from './helper.js'

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

t.test('the task reaches each agent as one argv element, byte for byte, never as a flag', async (t) => {
  const app = await build(t)
  for (const task of hostileTasks) {
    const crush = await post(app, 'crush_run', { task })
    t.equal(crush.status, 200)
    t.same(echoed(crush.body).argv, ['run', '--', task], `crush argv for ${JSON.stringify(task)}`)
    t.equal(echoed(crush.body).prompt, task)
    t.same(crush.body.command, ['crush', 'run', '--', task])

    const claude = await post(app, 'claude_run', { task })
    t.equal(claude.status, 200)
    t.same(echoed(claude.body).argv, ['-p', '--output-format', 'json', '--permission-mode', 'bypassPermissions', '--', task])
    t.equal(echoed(claude.body).prompt, task)
  }
  t.notOk(existsSync('/tmp/agent-runner-pwned'), 'no shell ran the task')
})

t.test('a successful crush run answers 200 with the whole result', async (t) => {
  const app = await build(t)
  const { status, body, headers } = await post(app, 'crush_run', { task: 'hello' })
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
  const { status, body } = await post(app, 'crush_run', { task: '@fail' })
  t.equal(status, 200)
  t.match(body, { ok: false, exit_code: 1, signal: null, timed_out: false })
  t.match(body.output, /^ERROR something failed$/m)
})

t.test('an agent killed by a signal reports the signal and a null exit code', async (t) => {
  const app = await build(t)
  const { body } = await post(app, 'crush_run', { task: '@kill-self SIGKILL' })
  t.match(body, { ok: false, exit_code: null, signal: 'SIGKILL', timed_out: false, stop_reason: null })
})

t.test('the agent runs in cwd', async (t) => {
  const dir = tempDir(t)
  const app = await build(t)
  t.equal(echoed((await post(app, 'crush_run', { task: 'where', cwd: dir })).body).cwd, dir)
  t.equal(echoed((await post(app, 'claude_run', { task: 'where', cwd: dir })).body).cwd, dir)
})

t.test('stdout and stderr are merged in arrival order', async (t) => {
  const app = await build(t)
  const { body } = await post(app, 'crush_run', { task: '@interleave' })
  t.equal(body.output, 'out-1\nerr-2\nout-3\ninterleaved\n')
})

t.test('invalid UTF-8 from the agent does not break the response', async (t) => {
  const app = await build(t)
  const { status, body } = await post(app, 'crush_run', { task: '@invalid-utf8' })
  t.equal(status, 200)
  t.match(body.output, /^a\uFFFD\uFFFD\uFFFD\(b$/m)
  t.equal(body.output_bytes, 7 + Buffer.byteLength('wrote invalid utf-8\n'))
})

t.test('huge output keeps head and tail within the limit and reports the total', async (t) => {
  const app = await build(t, { AGENT_OUTPUT_LIMIT_BYTES: '65536' })
  const written = 20 * 1024 * 1024
  const { body } = await post(app, 'crush_run', { task: `@flood ${written}` })
  t.equal(body.ok, true)
  t.equal(body.output_truncated, true)
  t.equal(body.output_bytes, written + Buffer.byteLength('flooded\n'))
  t.ok(Buffer.byteLength(body.output) < 65536 + 200, 'output stays near the limit')
  t.match(body.output, /^x{32768}\n\[… \d+ bytes omitted by agent-runner …\]\n/)
  t.match(body.output, /xflooded\n$/, 'the tail holds the last words')
})

t.test('claude: the answer text becomes output and the report its own object', async (t) => {
  const app = await build(t)
  const { body } = await post(app, 'claude_run', { task: '@sleep 1' })
  t.equal(body.output, 'slept 1')
  t.match(body, {
    ok: true,
    exit_code: 0,
    agent_report: { is_error: false, subtype: 'success', session_id: /^[0-9a-f-]{36}$/, num_turns: 2, total_cost_usd: 0.0123, duration_ms: Number }
  })
})

t.test('claude exiting 0 with is_error is not ok', async (t) => {
  const app = await build(t)
  const { body } = await post(app, 'claude_run', { task: '@is-error' })
  t.match(body, { ok: false, exit_code: 0, output: 'API Error: 529 overloaded', agent_report: { is_error: true } })
})

t.test('extra arguments and the permission mode come from the configuration', async (t) => {
  const app = await build(t, {
    CRUSH_EXTRA_ARGS: '["--quiet"]',
    CLAUDE_EXTRA_ARGS: '["--model","sonnet"]',
    CLAUDE_PERMISSION_MODE: 'acceptEdits'
  })
  t.same(echoed((await post(app, 'crush_run', { task: 'x' })).body).argv, ['run', '--quiet', '--', 'x'])
  t.same(echoed((await post(app, 'claude_run', { task: 'x' })).body).argv, [
    '-p', '--output-format', 'json', '--permission-mode', 'acceptEdits', '--model', 'sonnet', '--', 'x'
  ])
})

t.test('a missing binary answers 503 AGENT_NOT_INSTALLED and frees the slot', async (t) => {
  const app = await build(t, { CRUSH_BIN: 'crush-not-installed-here', MAX_CRUSH_AGENTS: '1' })
  for (let attempt = 0; attempt < 2; attempt++) {
    const { status, body } = await post(app, 'crush_run', { task: 'x' })
    t.equal(status, 503)
    t.match(body, { statusCode: 503, code: 'AGENT_NOT_INSTALLED', message: /crush-not-installed-here/ })
    t.equal(app.slots.inUse('crush_run'), 0)
  }
})

t.test('a binary that cannot be executed answers 503 AGENT_SPAWN_FAILED', async (t) => {
  const app = await build(t, { CRUSH_BIN: join(tempDir(t)) })
  const { status, body } = await post(app, 'crush_run', { task: 'x' })
  t.equal(status, 503)
  t.match(body, { code: 'AGENT_SPAWN_FAILED' })
  t.equal(app.slots.inUse('crush_run'), 0)
})

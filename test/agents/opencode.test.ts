import t from 'tap'
import { opencode } from '#src/agents/opencode.js'
import { reportOf } from '../helpers/reports.js'
import { build, runTool, scenario, standInEnv } from '../helpers/index.js'
import { stoppedAtDeadline } from '../helpers/real-agents.js'

// opencode (`opencode run`): its argv, its JSON events, its permissions; the stand-in
// (test/fixtures/agents/opencode.mjs) for the behaviours, the real CLI (pinned, installed by this test) offline.

const OPENCODE_VERSION = '1.18.33'

// Each test has its services and directories of its own, and most of their time is spent waiting on a deadline or a
// CLI's start: they run side by side.
t.jobs = 4

t.test('the task on stdin, never quoted as words would be; permissions approved, JSON events asked for; ' +
  'the answer is its text', async (t) => {
  const app = await build(t)
  for (const task of ['--model x/y hello', 'run', '"quoted" $(id)', 'two words']) {
    const body = await runTool(app, 'opencode_run', { task })
    t.same(body.command, ['opencode', 'run', '--format', 'json', '--auto'])
    t.match(body, {
      tool: 'opencode_run', ok: true, exit_code: 0, agent_report: { is_error: false, session_id: /^ses_/ }
    })
    t.equal(JSON.parse(body.output).prompt, task, `${JSON.stringify(task)} byte for byte`)
  }
  const approved = await runTool(app, 'opencode_run', { task: scenario.needsPermission() })
  t.match(approved, { ok: true }, 'a tool asking for permission is let through (--auto)')
})

t.test('an error event is the run’s report; offline, opencode waits until its deadline stops it', async (t) => {
  const failed = await runTool(await build(t), 'opencode_run', { task: scenario.fail() })
  t.match(failed, {
    ok: false, exit_code: 1, output: 'something failed', agent_report: { is_error: true, subtype: 'error' }
  })
  const { OPENAI_API_KEY: _key, ...offline } = standInEnv()
  const stuck = await runTool(
    await build(t, { AGENT_KILL_GRACE_MS: '200' }, offline), 'opencode_run', { task: 'hello', timeout: 1 }
  )
  t.match(stuck, { ok: false, timed_out: true, stop_reason: 'timeout', output: '', agent_report: null })
})

t.test('the report parser: text parts, errors, or nothing it knows', async (t) => {
  const events = (...lines: object[]) => lines.map((line) => JSON.stringify(line)).join('\n')
  t.same(
    reportOf(opencode, events(
      { type: 'step_start', sessionID: 's1', part: {} },
      { type: 'text', sessionID: 's1', part: { text: 'one' } },
      { type: 'tool_use', sessionID: 's1', part: { tool: 'bash' } },
      { type: 'text', sessionID: 's1', part: { text: 'two' } },
      { type: 'step_finish', sessionID: 's1', part: {} }
    )),
    { text: 'one\ntwo', report: { is_error: false, subtype: undefined, session_id: 's1' } }
  )
  t.same(reportOf(
    opencode,
    events({ type: 'error', sessionID: 's2', error: { name: 'ProviderAuthError', data: { message: 'no key' } } })
  ), {
    text: 'no key',
    report: { is_error: true, subtype: 'error', session_id: 's2' }
  })
  t.match(
    reportOf(opencode, events({ type: 'error', sessionID: 's3', error: { name: 'APIError' } })), { text: 'APIError' }
  )
  t.match(reportOf(opencode, events({ type: 'error', sessionID: 's4' })), { text: 'error' })
  for (const unknown of ['', 'plain', '{"type":"text"}', '{"type":']) {
    t.equal(reportOf(opencode, unknown), null, JSON.stringify(unknown))
  }
})

t.test(`the real opencode ${OPENCODE_VERSION}, offline and without credentials: stopped at its deadline, ` +
  'nothing of it left', async (t) => {
  await stoppedAtDeadline(t, {
    name: 'opencode', pkg: 'opencode-ai', version: OPENCODE_VERSION, printsVersion: /^1\.\d+\.\d+/
  })
})

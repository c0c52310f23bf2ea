import t from 'tap'
import { codex } from '#src/agents/codex.js'
import { reportOf } from '../helpers/reports.js'
import { build, runTool, scenario, standInEnv } from '../helpers/index.js'
import { stoppedAtDeadline } from '../helpers/real-agents.js'

// OpenAI Codex CLI (`codex exec`): its argv, its JSONL report, its refusals; the stand-in
// (test/fixtures/agents/codex.mjs) for the behaviours, the real CLI (pinned, installed by this test) offline.

const CODEX_VERSION = '0.171.0'

// Each test has its services and directories of its own, and most of their time is spent waiting on a deadline or a
// CLI's start: they run side by side.
t.jobs = 4

t.test('the task on stdin, its prompt `-`: an option, a subcommand’s name, `-` itself, ' +
  'anything reaches codex as its prompt', async (t) => {
  const app = await build(t)
  for (const task of ['--help me', 'resume', 'review the diff; $(id)', '-']) {
    const body = await runTool(app, 'codex_run', { task })
    t.same(body.command, [
      'codex', 'exec', '--json', '--skip-git-repo-check', '--color', 'never', '-c', 'allow_login_shell=false',
      '--dangerously-bypass-approvals-and-sandbox', '--', '-'
    ])
    t.match(body, { tool: 'codex_run', ok: true, exit_code: 0, agent_report: { is_error: false, session_id: String } })
    t.equal(JSON.parse(body.output).prompt, task, `${JSON.stringify(task)} byte for byte`)
  }
})

t.test('CODEX_SANDBOX picks codex’s own sandbox instead of bypassing it', async (t) => {
  const app = await build(t, { CODEX_SANDBOX: 'workspace-write' })
  const body = await runTool(app, 'codex_run', { task: 'hello' })
  t.same(body.command, [
    'codex', 'exec', '--json', '--skip-git-repo-check', '--color', 'never', '-c', 'allow_login_shell=false',
    '--sandbox', 'workspace-write', '--', '-'
  ])
  t.equal(body.ok, true)
})

t.test('a failed turn is the run’s report; offline, codex reconnects until its deadline stops it', async (t) => {
  const failed = await runTool(await build(t), 'codex_run', { task: scenario.fail() })
  t.match(failed, {
    ok: false, exit_code: 1, output: 'something failed', agent_report: { is_error: true, subtype: 'turn.failed' }
  })
  const { OPENAI_API_KEY: _key, ...offline } = standInEnv()
  const stuck = await runTool(
    await build(t, { AGENT_KILL_GRACE_MS: '200' }, offline), 'codex_run', { task: 'hello', timeout: 3 }
  )
  t.match(stuck, {
    ok: false, timed_out: true, stop_reason: 'timeout', signal: null, exit_code: 130, agent_report: { is_error: true }
  })
  t.match(stuck.output, /^Reconnecting\.\.\. \d+\/5/, 'its last word on the way')
})

t.test('the report parser: the last agent message, a failed turn, a stream error, or nothing it knows', async (t) => {
  const events = (...lines: object[]) => lines.map((line) => JSON.stringify(line)).join('\n')
  t.same(
    reportOf(codex, events(
      { type: 'thread.started', thread_id: 't1' },
      { type: 'item.completed', item: { id: 'a', type: 'agent_message', text: 'first' } },
      { type: 'item.completed', item: { id: 'b', type: 'command_execution', command: 'ls' } },
      { type: 'item.completed', item: { id: 'c', type: 'agent_message', text: 'final' } },
      { type: 'turn.completed', usage: {} }
    )),
    { text: 'final', report: { is_error: false, subtype: undefined, session_id: 't1' } }
  )
  t.same(reportOf(
    codex, events({ type: 'thread.started', thread_id: 't2' }, { type: 'turn.failed', error: { message: 'quota' } })
  ), {
    text: 'quota',
    report: { is_error: true, subtype: 'turn.failed', session_id: 't2' }
  })
  t.same(reportOf(codex, events({ type: 'error', message: 'stream disconnected' })), {
    text: 'stream disconnected',
    report: { is_error: true, subtype: 'error', session_id: undefined }
  })
  t.match(
    reportOf(codex, events({ type: 'thread.started', thread_id: 't3' })), { report: { is_error: true } },
    'started, never ended'
  )
  t.same(
    reportOf(codex, events(
      { type: 'thread.started', thread_id: 't4' },
      { type: 'error', message: 'Reconnecting... 2/5' },
      { type: 'item.completed', item: { id: 'a', type: 'agent_message', text: 'done anyway' } },
      { type: 'turn.completed', usage: {} }
    )),
    { text: 'done anyway', report: { is_error: false, subtype: undefined, session_id: 't4' } },
    'an error on the way is not the end'
  )
  for (const unknown of ['', 'plain text', '{"type":', '{"other":1}']) {
    t.equal(reportOf(codex, unknown), null, JSON.stringify(unknown))
  }
})

t.test(`the real codex ${CODEX_VERSION}, offline and without credentials: stopped at its deadline, ` +
  'nothing of it left', async (t) => {
  await stoppedAtDeadline(t, {
    name: 'codex', pkg: '@openai/codex', version: CODEX_VERSION, printsVersion: /^codex-cli \d/
  })
})

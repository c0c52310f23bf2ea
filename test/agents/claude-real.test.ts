import t from 'tap'
import { build, createRun, runTool, settled, tempDir } from '../helpers/index.js'
import { realClaude } from '../helpers/real-clis/claude.js'
import { credentialFree } from '../helpers/real-agents.js'

// The real Claude Code CLI (pinned, installed by the tests), with no credentials anywhere: no API key or token in its
// environment and a fresh HOME without a login.

const isRoot = process.getuid?.() === 0

t.test('the real claude reports "Not logged in" and it comes back as a failed run', async (t) => {
  const app = await build(
    t, { CLAUDE_BIN: await realClaude(), CLAUDE_PERMISSION_MODE: 'default' }, credentialFree(tempDir(t))
  )
  const result = await runTool(app, 'claude_run', { task: 'say hello', timeout: 60 })
  t.match(result, {
    tool: 'claude_run',
    ok: false,
    exit_code: 1,
    timed_out: false,
    output: /Not logged in/,
    agent_report: { is_error: true, session_id: String }
  })
  t.notMatch(result.output, /^\{/, 'output is the text, not the JSON report')
})

t.test('where claude refuses the permission mode, ' +
  'its own message is the output', { skip: !isRoot && 'claude refuses bypassPermissions only as root' }, async (t) => {
  const app = await build(t, { CLAUDE_BIN: await realClaude() }, credentialFree(tempDir(t)))
  const result = await runTool(app, 'claude_run', { task: 'say hello', timeout: 60 })
  t.match(result, { ok: false, exit_code: 1, agent_report: null, output: /cannot be used with root\/sudo privileges/ })
  t.ok(result.command.includes('bypassPermissions'), 'the default mode lets claude work unattended, as crush run does')
})

t.test('followed live (an async run), the real claude prints stream-json and its report is still parsed', async (t) => {
  const app = await build(
    t, { CLAUDE_BIN: await realClaude(), CLAUDE_PERMISSION_MODE: 'default' }, credentialFree(tempDir(t))
  )
  const created = await createRun(app, { tool: 'claude_run', task: 'say hello', timeout: 60 })
  const state = await settled(app, created.id, 60_000)
  t.match(state, {
    status: 'failed', result: { exit_code: 1, output: /Not logged in/, agent_report: { is_error: true } }
  })
  t.ok(state.result?.command.includes('stream-json'))
})

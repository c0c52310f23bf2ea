import t from 'tap'
import { build, post, REAL_CLAUDE_BIN, tempDir } from './helper.js'
import { credentialFree } from './real-agents.js'

// The real Claude Code CLI (pinned devDependency), with no credentials anywhere: no API key or token in its
// environment and a fresh HOME without a login.

const isRoot = process.getuid?.() === 0

t.test('the real claude reports "Not logged in" and it comes back as a failed run', async (t) => {
  const app = await build(t, { CLAUDE_BIN: REAL_CLAUDE_BIN, CLAUDE_PERMISSION_MODE: 'default' }, credentialFree(tempDir(t)))
  const { status, body } = await post(app, 'claude_run', { task: 'say hello', timeout: 60 })
  t.equal(status, 200)
  t.match(body, {
    tool: 'claude_run',
    ok: false,
    exit_code: 1,
    timed_out: false,
    output: /Not logged in/,
    agent_report: { is_error: true, session_id: String }
  })
  t.notMatch(body.output, /^\{/, 'output is the text, not the JSON report')
})

t.test('where claude refuses the permission mode, its own message is the output', { skip: !isRoot && 'claude refuses bypassPermissions only as root' }, async (t) => {
  const app = await build(t, { CLAUDE_BIN: REAL_CLAUDE_BIN }, credentialFree(tempDir(t)))
  const { status, body } = await post(app, 'claude_run', { task: 'say hello', timeout: 60 })
  t.equal(status, 200)
  t.match(body, { ok: false, exit_code: 1, agent_report: null, output: /cannot be used with root\/sudo privileges/ })
  t.ok(body.command.includes('bypassPermissions'), 'the default mode lets claude work unattended, as crush run does')
})

t.test('followed live (an async run), the real claude prints stream-json and its report is still parsed', async (t) => {
  const app = await build(t, { CLAUDE_BIN: REAL_CLAUDE_BIN, CLAUDE_PERMISSION_MODE: 'default' }, credentialFree(tempDir(t)))
  const created = (await app.inject({ method: 'POST', url: '/runs', payload: { tool: 'claude_run', task: 'say hello', timeout: 60 } })).json()
  let state = created
  for (let attempt = 0; state.status === 'running' && attempt < 600; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    state = (await app.inject({ method: 'GET', url: `/runs/${created.id}` })).json()
  }
  t.match(state, { status: 'failed', result: { exit_code: 1, output: /Not logged in/, agent_report: { is_error: true } } })
  t.ok(state.result.command.includes('stream-json'))
})

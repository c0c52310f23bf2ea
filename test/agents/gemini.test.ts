import t from 'tap'
import { gemini } from '#src/agents/gemini.js'
import { reportOf } from '../helpers/reports.js'
import { build, parseNdjson, runTool, scenario, standInEnv, tempDir, type ResultEvent } from '../helpers/index.js'
import { npmTool } from '../helpers/npm-tool.js'
import { credentialFree } from '../helpers/real-agents.js'

// Gemini CLI: its argv, its two report formats, its own errors; the stand-in (test/fixtures/agents/gemini.mjs) for
// the behaviours, the real CLI (pinned, installed by this test) for what it does here with no credentials.

const GEMINI_VERSION = '0.61.0'

// Each test has its services and directories of its own, and most of their time is spent waiting on a CLI: they run
// side by side.
t.jobs = 4

t.test('the task is its piped prompt, whatever it looks like; tools approved, the folder trusted, ' +
  'stream-json asked for', async (t) => {
  const app = await build(t)
  const task = '--version -p "x" $(rm -rf /); --output-format=text'
  const body = await runTool(app, 'gemini_run', { task })
  t.same(body.command, ['gemini', '--output-format', 'stream-json', '--approval-mode=yolo', '--skip-trust'])
  t.match(body, { tool: 'gemini_run', ok: true, exit_code: 0, agent_report: { is_error: false, session_id: String } })
  const echoed = JSON.parse(body.output) as { prompt: string; argv: string[] }
  t.equal(echoed.prompt, task, 'the prompt byte for byte')
  t.notMatch(body.output, /YOLO mode is enabled/, 'output is the response, not what gemini said around it')
})

t.test('gemini’s own failure is the run’s report: its message as output, ok false, its exit code', async (t) => {
  const { GEMINI_API_KEY: _key, ...withoutKey } = standInEnv()
  const app = await build(t, {}, withoutKey)
  const body = await runTool(app, 'gemini_run', { task: 'hello' })
  // Before its run begins, stream-json's failure is plain text: no report, what it printed.
  t.match(body, {
    ok: false, exit_code: 41, output: /^YOLO mode is enabled.*\nPlease set an Auth method/s, agent_report: null
  })
  const failed = await runTool(await build(t), 'gemini_run', { task: scenario.fail() })
  t.match(failed, { ok: false, exit_code: 1, output: 'something failed', agent_report: { is_error: true } })
})

t.test('followed live, gemini prints stream-json and the answer is its assistant messages', async (t) => {
  const app = await build(t)
  const task = scenario.drip(2, 10)
  const response = await app.inject({
    method: 'POST', url: '/tools/gemini_run', headers: { accept: 'application/x-ndjson' }, payload: { task }
  })
  const events = parseNdjson(response.body)
  t.match(events.at(-1), {
    type: 'result', result: { ok: true, output: 'dripped', agent_report: { is_error: false, session_id: String } }
  })
  t.ok(
    events.some((event) => event.type === 'output' && /"type":"init"/.test(event.data)),
    'its events reach the stream as they come'
  )
  t.match((events.at(-1) as ResultEvent).result.command, ['gemini', '--output-format', 'stream-json'])
})

t.test('the report parser: stream events, or nothing it knows', async (t) => {
  const stream = [
    '{"type":"init","session_id":"s3"}',
    '{"type":"message","role":"user","content":"q"}',
    '{"type":"message","role":"assistant","content":"an","delta":true}',
    '{"type":"message","role":"assistant","content":"swer","delta":true}',
    '{"type":"result","status":"success","stats":{}}'
  ].join('\n')
  t.same(reportOf(gemini, stream), {
    text: 'answer', report: { is_error: false, subtype: undefined, session_id: 's3' }
  })
  t.same(reportOf(
    gemini, '{"type":"result","status":"error","error":{"type":"FatalTurnLimitedError","message":"too many turns"}}'
  ), {
    text: 'too many turns',
    report: { is_error: true, subtype: 'FatalTurnLimitedError', session_id: undefined }
  })
  const fatal = 'YOLO mode is enabled.\nPlease set an Auth method in your settings.json\n'
  for (const unknown of ['', fatal, '{not json', '{"other":1}', '[1,2]']) {
    t.equal(reportOf(gemini, unknown), null, JSON.stringify(unknown))
  }
})

t.test(`the real gemini ${GEMINI_VERSION}, with no credentials: ` +
  'its auth error comes back as a failed run', async (t) => {
  const gemini = await npmTool('@google/gemini-cli', GEMINI_VERSION, 'gemini')
  const app = await build(t, { GEMINI_BIN: gemini }, credentialFree(tempDir(t)))
  // A task that would print the version and succeed if gemini read it as its option.
  const body = await runTool(app, 'gemini_run', { task: '--version', timeout: 120 })
  t.match(body, {
    tool: 'gemini_run',
    ok: false,
    exit_code: 41,
    timed_out: false,
    output: /Please set an Auth method/,
    agent_report: null
  })
})

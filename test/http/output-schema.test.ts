import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { toolNameOf } from '#src/agents/spec.js'
import { build, echoed, refused, runTool, standInEnv, tempDir, type ToolName } from '../helpers/index.js'

// `output_schema` through the API (issue 41, item 3), with each agent's stand-in: the agent is asked, after its task,
// to end with an object of the schema; the stand-ins answer with their echo, a JSON object, which meets or misses it.

/** What every stand-in's echo holds. */
const ECHO_SCHEMA = {
  type: 'object',
  properties: { prompt: { type: 'string' }, argv: { type: 'array', items: { type: 'string' } } },
  required: ['prompt', 'argv']
}

for (const tool of BUILT_IN_AGENTS.map((spec): ToolName => toolNameOf(spec))) {
  t.test(`${tool}: an answer ending with an object of the schema is its structured_output; one that does not is ` +
    'not ok', async (t) => {
    const app = await build(t)
    const task = 'Report what you received'
    const met = await runTool(app, tool, { task, output_schema: ECHO_SCHEMA })
    t.match(met, { ok: true, error: null, structured_output: { prompt: String, argv: Array } })
    const prompt = (met.structured_output as { prompt: string }).prompt
    t.ok(prompt.startsWith(`${task}\n\n`), 'the task, byte for byte, then what the answer must end with')
    t.match(prompt, JSON.stringify(ECHO_SCHEMA))
    t.equal(echoed(met).prompt, prompt)
    const missed = await runTool(app, tool, {
      task, output_schema: { type: 'object', required: ['verdict'], properties: { verdict: { type: 'string' } } }
    })
    t.match(missed, {
      ok: false,
      structured_output: null,
      error: { code: 'OUTPUT_SCHEMA_MISMATCH', schema_errors: [{ instance_path: '', message: /verdict/ }] }
    })
  })
}

t.test('crush takes its task on its command line: a task and a schema too long together for one argv element are ' +
  '400 BAD_OUTPUT_SCHEMA, and nothing starts; claude reads the same prompt on its standard input', async (t) => {
  const log = join(tempDir(t), 'starts.log')
  const app = await build(t, {}, standInEnv({ STAND_IN_LOG: log }))
  // 30,000 characters of three bytes each, and a schema of 45 KB: each within its bound, together over 128 KiB.
  const task = '€'.repeat(30_000)
  const schema = { ...ECHO_SCHEMA, description: 'x'.repeat(45_000) }
  const answer = await refused(app, 'crush_run', { task, output_schema: schema })
  t.match(answer, { status: 400, body: { code: 'BAD_OUTPUT_SCHEMA', message: /command line/ } })
  t.notOk(existsSync(log) && readFileSync(log, 'utf8') !== '', 'no agent started')
  t.match(await runTool(app, 'claude_run', { task, output_schema: schema }), { ok: true, structured_output: Object })
})

t.test('a schema Ajv cannot compile is 400 BAD_OUTPUT_SCHEMA, and nothing starts', async (t) => {
  const log = join(tempDir(t), 'starts.log')
  const app = await build(t, {}, standInEnv({ STAND_IN_LOG: log }))
  for (const schema of [{ type: 'object', requred: ['x'] }, { type: 'nope' }]) {
    const answer = await refused(app, 'crush_run', { task: 'x', output_schema: schema })
    t.same([answer.status, answer.body.code], [400, 'BAD_OUTPUT_SCHEMA'])
  }
  t.notOk(existsSync(log) && readFileSync(log, 'utf8') !== '', 'no agent started')
})

t.test('a backtracking pattern checks an answer at once through the service (RE2), and a pattern RE2 cannot run is ' +
  '400 BAD_OUTPUT_SCHEMA before anything starts', async (t) => {
  const app = await build(t)
  // The stand-in's answer holds its prompt: 40 x's, where a backtracking engine doubles its work with each one.
  const schema = { type: 'object', properties: { prompt: { type: 'string', pattern: '(x+x+)+y' } } }
  t.match(await runTool(app, 'claude_run', { task: 'x'.repeat(40), output_schema: schema }), {
    ok: false, error: { code: 'OUTPUT_SCHEMA_MISMATCH', schema_errors: [{ instance_path: '/prompt' }] }
  })
  const lookahead = { type: 'object', properties: { prompt: { type: 'string', pattern: '(?=x)' } } }
  t.match(await refused(app, 'claude_run', { task: 'x', output_schema: lookahead }), {
    status: 400, body: { code: 'BAD_OUTPUT_SCHEMA', message: /RE2/ }
  })
})

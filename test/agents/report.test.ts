import t from 'tap'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import fc from 'fast-check'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { claude } from '#src/agents/claude.js'
import { AgentReport } from '#src/schemas/run.js'
import { reportOf } from '../helpers/reports.js'
import { build, createRun, runTool, settled, tempDir } from '../helpers/index.js'

t.test('the last result line is the report, after any stderr noise', async (t) => {
  const report = {
    type: 'result',
    subtype: 'success',
    is_error: false,
    result: 'Done.',
    session_id: 's1',
    num_turns: 3,
    total_cost_usd: 0.5,
    duration_ms: 1200,
    duration_api_ms: 900,
    usage: {}
  }
  const parsed = reportOf(claude, `warning: something\n{"not":"a report"}\n${JSON.stringify(report)}\n`)
  t.same(parsed, {
    text: 'Done.',
    report: {
      is_error: false,
      subtype: 'success',
      session_id: 's1',
      num_turns: 3,
      total_cost_usd: 0.5,
      duration_ms: 1200,
      duration_api_ms: 900
    }
  })
})

t.test('no report: null, so the route falls back to what was printed', async (t) => {
  t.equal(reportOf(claude, '--dangerously-skip-permissions cannot be used with root/sudo privileges\n'), null)
  t.equal(reportOf(claude, '{"type":"result"'), null, 'a truncated line')
  t.equal(reportOf(claude, '{"type":"assistant","is_error":false}'), null, 'not the result event')
})

t.test('fields of the wrong type are left out rather than trusted', async (t) => {
  const parsed = reportOf(claude, '{"type":"result","is_error":true,"num_turns":"many","session_id":7}')
  t.same(parsed, {
    text: '',
    report: {
      is_error: true,
      subtype: undefined,
      session_id: undefined,
      num_turns: undefined,
      total_cost_usd: undefined,
      duration_ms: undefined,
      duration_api_ms: undefined
    }
  })
})

t.test('numbers JSON cannot carry back become null, and the run still answers 200', async (t) => {
  const parsed = reportOf(
    claude,
    '{"type":"result","is_error":false,"result":"x","num_turns":1e400,"total_cost_usd":-1e999,' +
      '"duration_ms":12,"duration_api_ms":9007199254740993}'
  )
  t.match(parsed!.report, { num_turns: null, total_cost_usd: null, duration_ms: 12, duration_api_ms: 9007199254740992 })
  t.equal(
    reportOf(claude, '{"type":"result","is_error":false,"num_turns":1e300}')!.report.num_turns, null,
    'an integer past 2^53 is no count'
  )

  const dir = tempDir(t)
  const agent = join(dir, 'claude')
  writeFileSync(
    agent,
    `#!/bin/sh\necho '{"type":"result","is_error":false,"result":"done","num_turns":1e400,"total_cost_usd":1e999}'\n`,
    { mode: 0o755 }
  )
  const app = await build(t, { CLAUDE_BIN: agent })
  t.match(await runTool(app, 'claude_run', { task: 'x' }), {
    ok: true, output: 'done', agent_report: { num_turns: null, total_cost_usd: null }
  })
  const created = await createRun(app, { tool: 'claude_run', task: 'x' })
  // settled() reads the run until it has ended, and fails on any answer but a 200 (a 500, say).
  t.match(
    await settled(app, created.id), { status: 'succeeded', result: { agent_report: { num_turns: null } } },
    'the async run answers 200, not 500'
  )
})

t.test('any report an agent prints serializes into the answer (fuzz)', async (t) => {
  const schema = TypeCompiler.Compile(AgentReport)
  const number = fc.oneof(
    fc.double(), fc.integer(), fc.constantFrom('1e400', '-1e400', '9007199254740993', '1e-400', '-0')
  )
  const value = fc.oneof(number, fc.string(), fc.boolean(), fc.constant(null), fc.constant('{"nested":[1e999]}'))
  const field = (arbitrary: typeof value) =>
    arbitrary.map((raw) => (typeof raw === 'string' && /^[-0-9e.]+$/.test(raw) ? raw : JSON.stringify(raw)))
  fc.assert(
    fc.property(field(value), field(value), field(value), field(value), field(value), fc.boolean(), (
      turns, cost, duration, api, result, isError
    ) => {
      const line = `{"type":"result","is_error":${isError},"num_turns":${turns},"total_cost_usd":${cost},` +
        `"duration_ms":${duration},"duration_api_ms":${api},"result":${result}}`
      const parsed = reportOf(claude, line)
      if (parsed === null) return true
      const roundTrip = JSON.parse(JSON.stringify(parsed.report)) as Record<string, unknown>
      // Every value survives JSON unchanged (-0 aside, which JSON writes as 0), and the result matches the schema.
      const unchanged = Object.entries(parsed.report as Record<string, unknown>).every(
        ([key, entry]) =>
          entry === undefined || Object.is(roundTrip[key], entry) || (entry === 0 && roundTrip[key] === 0)
      )
      return unchanged && schema.Check(roundTrip)
    }),
    { numRuns: 2000 }
  )
})

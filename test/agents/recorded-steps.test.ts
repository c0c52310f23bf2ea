import t from 'tap'
import { readFileSync } from 'node:fs'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { claudeSteps } from '#src/agents/claude.js'
import { RunSteps } from '#src/runs/run-steps.js'
import { reportOf } from '../helpers/reports.js'
import { readSteps } from '../helpers/steps.js'
import { fromRoot } from '../helpers/root.js'

// What each real CLI printed in the end-to-end suite's steps run (e2e/real-cli.ts, recorded with
// RECORD_STEP_FIXTURES=1): `echo step-one`, then `sh -c 'exit 3'`, then the answer ALL DONE. Their noise on stderr
// (warnings, codex's "Reading additional input from stdin...") is in there, as the service receives it.

// Crush is not installable here (its stand-in's plain text is read in test/http/steps.test.ts).
const structured = BUILT_IN_AGENTS.filter((spec) => spec.steps !== undefined && spec.steps().readsText !== true)

const read = (agent: string, stream: Buffer, cuts: number[]) =>
  readSteps(structured.find((spec) => spec.agent === agent)!.steps!(), stream, cuts)

for (const { agent } of structured) {
  t.test(`${agent}: its recorded run read into steps, however it is chunked`, async (t) => {
    const stream = readFileSync(fromRoot(`test/fixtures/streams/${agent}.out`))
    const { steps, skipped } = read(agent, stream, [])
    const commands = steps.filter((step) => step.kind === 'command')
    // gemini tells an exit code only for a command that printed nothing.
    t.match(commands, [
      { phase: 'started', command: /echo step-one/, status: 'running' },
      { phase: 'completed', command: /echo step-one/, exit_code: agent === 'gemini' ? null : 0, output: /step-one/ },
      { phase: 'started', command: /exit 3/ },
      { phase: 'completed', command: /exit 3/, exit_code: 3 }
    ])
    t.equal(commands.length, 4)
    t.equal(commands[0]!.call_id, commands[1]!.call_id, 'a start and its end share the CLI\'s id')
    t.not(commands[0]!.call_id, commands[2]!.call_id)
    t.match(steps.filter((step) => step.kind === 'message'), [{ text: 'ALL DONE' }])
    t.ok(steps.some((step) => step.kind === 'usage' && (step.input_tokens ?? 0) > 0), 'the tokens it used')
    // The same pass reads its report: the answer, a success, the session its stream named.
    const parsed = reportOf(structured.find((spec) => spec.agent === agent)!, stream.toString())
    t.match(
      parsed, { text: 'ALL DONE', report: { is_error: false, session_id: String } }, 'its report, read as it came'
    )
    const noise = stream.toString().split('\n').filter((line) => line.trim() !== '' && !line.startsWith('{')).length
    t.equal(skipped, noise, `${noise} line(s) of noise skipped and counted`)
    for (let trial = 0; trial < 200; trial++) {
      const cuts = [
        ...new Set(Array.from({ length: 1 + (trial % 12) }, () => 1 + Math.floor(Math.random() * (stream.length - 1))))
      ]
      cuts.sort((a, b) => a - b)
      t.same(read(agent, stream, cuts).steps, steps, `cut at ${cuts.join(',')}`)
    }
  })
}

// The real claude told to run `touch made-by-claude` under a permission mode that refuses it (e2e/real-cli.ts,
// proveClaudeDenials): in dontAsk and default alike a permission_denied line, the error tool_result with its meta
// saying reject, the denial in the result line; and claude calls the run a success.
for (const fixture of ['claude-denied', 'claude-denied-default']) {
  t.test(`${fixture}: the refused command is one denied step, ` +
    'and every call refused makes the run not ok', async (t) => {
    const stream = readFileSync(fromRoot(`test/fixtures/streams/${fixture}.out`))
    const { steps } = readSteps(claudeSteps(), stream)
    t.match(steps.filter((step) => step.kind === 'command'), [
      { phase: 'started', command: 'touch made-by-claude', status: 'running' },
      { phase: 'completed', command: 'touch made-by-claude', status: 'denied', exit_code: null }
    ])
    t.equal(steps.filter((step) => step.kind === 'command').length, 2, 'ended once, though three lines tell it')
    const run = new RunSteps(claudeSteps())
    run.push(stream)
    run.end()
    const report = run.report()
    t.match(report.steps_summary, {
      commands: [{ command: 'touch made-by-claude', status: 'denied' }],
      denied: [{ kind: 'command', name: 'touch made-by-claude' }]
    })
    t.equal(report.steps_summary?.denied.length, 1, 'one refused call')
    t.equal(report.allDenied, true, 'every call refused: the run is not ok')

    // Each of the other two lines alone tells it too: the tool_result's meta, and the result line, which has the last
    // word on a call no line ended.
    for (const [what, left] of [
      ['the tool_result', /"subtype":"permission_denied"/],
      ['the result line', /"subtype":"permission_denied"|"type":"tool_result"/]
    ] as const) {
      const without = stream.toString().split('\n').filter((line) => !left.test(line)).join('\n')
      const ends = readSteps(claudeSteps(), Buffer.from(without)).steps.filter((step) => step.kind === 'command')
      t.match(
        ends, [{ phase: 'started' }, { phase: 'completed', command: 'touch made-by-claude', status: 'denied' }],
        `told by ${what}`
      )
      t.equal(ends.length, 2)
    }
  })
}

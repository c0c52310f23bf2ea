import t from 'tap'
import { readFileSync } from 'node:fs'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { readSteps } from '../helpers/steps.js'
import { fromRoot } from '../helpers/root.js'

// What each real CLI printed in the end-to-end suite's steps run (e2e/real-cli.ts, recorded with
// RECORD_STEP_FIXTURES=1): `echo step-one`, then `sh -c 'exit 3'`, then the answer ALL DONE. Their noise on stderr
// (warnings, codex's "Reading additional input from stdin...") is in there, as the service receives it.

const structured = BUILT_IN_AGENTS.filter((spec) => spec.steps !== undefined)

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
    const noise = stream.toString().split('\n').filter((line) => line.trim() !== '' && !line.startsWith('{')).length
    t.equal(skipped, noise, `${noise} line(s) of noise skipped and counted`)
    for (let trial = 0; trial < 200; trial++) {
      const cuts = [...new Set(Array.from({ length: 1 + (trial % 12) }, () => 1 + Math.floor(Math.random() * (stream.length - 1))))]
      cuts.sort((a, b) => a - b)
      t.same(read(agent, stream, cuts).steps, steps, `cut at ${cuts.join(',')}`)
    }
  })
}

import t from 'tap'
import { readFileSync } from 'node:fs'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { crossedLimit, pricedUsage, TurnCounter } from '#src/runs/run-budget.js'
import type { AgentTool } from '#src/agents/tools.js'
import { HeadTailBuffer } from '#src/process/head-tail-buffer.js'
import type { AgentEnd } from '#src/process/agent-process.js'
import { toRunResult } from '#src/runs/result.js'
import { RunSteps } from '#src/runs/run-steps.js'
import type { SudoReport } from '#src/schemas/run.js'
import type { LimitReason, RunLimits } from '#src/schemas/limits.js'
import type { RunUsage, Step } from '#src/schemas/steps.js'
import { fromRoot } from '../helpers/root.js'

const usage = (input: number | null, output: number | null, cost: number | null = null): RunUsage =>
  ({ input_tokens: input, output_tokens: output, cost_usd: cost, model: null })

t.test('a limit reached exactly is within it; one past is crossed: turns first, tokens, dollars', async (t) => {
  t.equal(crossedLimit({ max_turns: 2 }, 2, null), null)
  t.equal(crossedLimit({ max_turns: 2 }, 3, null), 'max_turns')
  t.equal(crossedLimit({ max_tokens: 100 }, 9, usage(60, 40)), null, 'input plus output')
  t.equal(crossedLimit({ max_tokens: 100 }, 9, usage(60, 41)), 'max_tokens')
  t.equal(crossedLimit({ max_tokens: 100 }, 9, usage(null, 101)), 'max_tokens', 'whichever the CLI reports')
  t.equal(crossedLimit({ max_cost_usd: 0.5 }, 9, usage(1, 1, 0.5)), null)
  t.equal(crossedLimit({ max_cost_usd: 0.5 }, 9, usage(1, 1, 0.51)), 'max_cost')
  t.equal(crossedLimit({ max_cost_usd: 0.5 }, 9, usage(1e9, 1e9, null)), null, 'no cost known: nothing to hold')
  t.equal(crossedLimit({}, 1e6, usage(1e9, 1e9, 1e9)), null, 'no limits')
  t.equal(crossedLimit({ max_turns: 1, max_tokens: 1, max_cost_usd: 0.01 }, 2, usage(5, 5, 1)), 'max_turns')
  t.equal(crossedLimit({ max_tokens: 1, max_cost_usd: 0.01 }, 2, usage(5, 5, 1)), 'max_tokens')
})

t.test('the operator’s price wins over the CLI’s when it prices the model used, else the asked one', async (t) => {
  const prices = { 'model-a': { input_usd_per_mtok: 3, output_usd_per_mtok: 15 } }
  const used = { ...usage(1_000_000, 100_000, 0), model: 'model-a' }
  t.equal(pricedUsage(used, { prices, model: undefined })?.cost_usd, 3 + 1.5, 'opencode’s 0 replaced')
  t.equal(pricedUsage(usage(2_000_000, 0), { prices, model: 'model-a' })?.cost_usd, 6, 'usage naming none: the asked')
  t.equal(pricedUsage({ ...usage(10, 10, 0.2), model: 'model-b' }, { prices, model: 'model-a' })?.cost_usd, 0.2,
    'a model it does not price: the CLI’s figure')
  t.equal(pricedUsage(usage(10, 10), { prices, model: '__proto__' })?.cost_usd, null, 'no inherited price')
  t.equal(pricedUsage(usage(null, null, null), { prices, model: 'model-a' })?.cost_usd, null, 'no tokens: no price')
  t.equal(pricedUsage(null, { prices, model: 'model-a' }), null)
})

t.test('a turn begins with the first message or call after the start or after a call’s result', async (t) => {
  const steps: Array<Pick<Step, 'kind'> & { phase?: 'started' | 'completed' }> = [
    { kind: 'message' }, { kind: 'command', phase: 'started' }, { kind: 'tool', phase: 'started' },
    { kind: 'usage' }, { kind: 'command', phase: 'completed' }, { kind: 'tool', phase: 'completed' },
    { kind: 'error' }, { kind: 'message' }, { kind: 'message' }, { kind: 'usage' }
  ]
  const counter = new TurnCounter()
  const seen = steps.map((step) => {
    counter.take(step)
    return counter.turns
  })
  t.same(seen, [1, 1, 1, 1, 1, 1, 1, 2, 2, 2], 'two calls of one response, their results, then the answer')
})

// Each real CLI's recorded run (test/fixtures/streams, e2e/real-cli.ts): `echo step-one`, `sh -c 'exit 3'`, then
// the answer, three model responses; their usage reported each its own way.
const structured = BUILT_IN_AGENTS.filter((spec) => spec.steps !== undefined && spec.steps().readsText !== true)

function crossingOf(agent: string, limits: RunLimits): { crossed: LimitReason | null; told: number; usage: unknown } {
  const spec = structured.find((each) => each.agent === agent)!
  let told = 0
  const run = new RunSteps(spec.steps!(), { limits, onLimit: () => { told++ } })
  run.push(readFileSync(fromRoot(`test/fixtures/streams/${agent}.out`)))
  run.end()
  const report = run.report()
  return { crossed: report.limitCrossed, told, usage: report.usage }
}

for (const { agent } of structured) {
  t.test(`${agent}: its recorded run is three turns, and its tokens as it reported them`, async (t) => {
    t.equal(crossingOf(agent, { max_turns: 3 }).crossed, null, 'three responses: within three turns')
    t.match(crossingOf(agent, { max_turns: 2 }), { crossed: 'max_turns', told: 1 }, 'past two, told once')
    const { usage: total } = crossingOf(agent, {}) as { usage: RunUsage }
    const tokens = total.input_tokens! + total.output_tokens!
    t.ok(tokens > 0)
    t.equal(crossingOf(agent, { max_tokens: tokens }).crossed, null, `${tokens} tokens in all: within`)
    t.equal(crossingOf(agent, { max_tokens: tokens - 1 }).crossed, 'max_tokens')
  })
}

t.test('summed and cumulative reports: opencode’s steps add up, claude’s result replaces its responses’', async (t) => {
  t.match(crossingOf('opencode', {}).usage, { input_tokens: 30, output_tokens: 15 }, 'three step_finish of 10 + 5')
  // Its responses' lines say 1 + 1 each as they begin; its result line the totals, which replace them.
  t.match(crossingOf('claude', {}).usage, { input_tokens: 3, output_tokens: 3, model: 'claude-opus-5-5' })
  t.equal(crossingOf('claude', { max_tokens: 5 }).crossed, 'max_tokens',
    'three responses of 1 + 1 reported as they began are past five before the result says six')
  t.match(crossingOf('codex', {}).usage, { input_tokens: 30, output_tokens: 15 }, 'one turn.completed')
})

t.test('a limit the steps crossed as the agent ended, or that its CLI stopped at itself, makes the result not ok',
  async (t) => {
    const tool = { name: 'codex_run' } as unknown as AgentTool
    const ended: AgentEnd = {
      pid: 1,
      exitCode: 0,
      signal: null,
      stopReason: null,
      durationMs: 5,
      output: new HeadTailBuffer(1024),
      containmentFailed: false
    }
    const sudo: SudoReport = { status: 'passwordless', password_needed: false, message: null }
    const steps = (crossed: LimitReason | null, limit?: LimitReason) => ({
      parsed: { text: 'done', report: { is_error: false }, ...(limit === undefined ? {} : { limit }) },
      session_id: null,
      usage: null,
      steps_summary: null,
      allDenied: false,
      limitCrossed: crossed
    })
    const command = { file: 'codex', args: [], cwd: undefined }
    t.match(toRunResult(tool, command, ended, sudo, steps(null)), { ok: true, stop_reason: null })
    t.match(toRunResult(tool, command, ended, sudo, steps('max_cost')), {
      ok: false, stop_reason: 'max_cost', exit_code: 0
    }, 'usage that came last: over its limit, exit 0 and all')
    t.match(toRunResult(tool, command, ended, sudo, steps(null, 'max_turns')), { ok: false, stop_reason: 'max_turns' },
      'the CLI’s own stop')
    t.match(toRunResult(tool, command, { ...ended, stopReason: 'timeout' }, sudo, steps('max_cost')), {
      stop_reason: 'timeout'
    }, 'the service’s own stop first')
  })

import t from 'tap'
import { readFileSync } from 'node:fs'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { claudeSteps } from '#src/agents/claude.js'
import { geminiSteps } from '#src/agents/gemini.js'
import { modelUsed } from '#src/agents/models.js'
import type { AgentSpec, StepParser } from '#src/agents/spec.js'
import { AgentTool } from '#src/agents/tools.js'
import { loadConfig } from '#src/config.js'
import type { Step } from '#src/schemas/steps.js'
import { fromRoot } from '../helpers/root.js'
import { readSteps } from '../helpers/steps.js'

// A run's model as each CLI gets it (its spec's args) and as each CLI's stream tells the one it used (its parser);
// through the service in test/http/models.test.ts.

const DEFAULTS = new Map(loadConfig({}).agents.map(({ spec, settings }) => [spec.agent, settings]))
const toolOf = (spec: AgentSpec) => new AgentTool(spec, DEFAULTS.get(spec.agent)!, {}, undefined)
const MODEL = 'vendor/some.model-1:tag@v2'

t.test('each CLI gets the model joined to its flag, one element, before the end of its options', async (t) => {
  for (const spec of BUILT_IN_AGENTS) {
    for (const session of [undefined, '0f9b1c52-3c5e-4b9e-9a51-0d6f7d2c1a10']) {
      const { args } = toolOf(spec).invocation('--help', session, MODEL)
      const at = args.indexOf(`--model=${MODEL}`)
      t.ok(at >= 0, `${spec.agent}: ${JSON.stringify(args)}`)
      t.equal(args.filter((arg) => arg.includes(MODEL)).length, 1, `${spec.agent}: never a value of its own`)
      const end = args.indexOf('--')
      if (end >= 0) t.ok(at < end, `${spec.agent}: an option, before \`--\``)
      // `codex exec resume` takes fewer options than `exec`: given to `exec`, before it, they hold.
      if (spec.agent === 'codex' && session !== undefined) t.ok(at < args.indexOf('resume'), 'codex: before resume')
    }
    t.notOk(toolOf(spec).invocation('x').args.some((arg) => arg.startsWith('--model')), `${spec.agent}: none asked`)
  }
})

t.test('the model used: the one the usage names, else the one announced when the usage names it or none', async (t) => {
  t.equal(modelUsed(['a'], 'b'), 'a', 'its usage names one: that one')
  t.equal(modelUsed([], 'b'), 'b', 'no call made: the announced one')
  t.equal(modelUsed(['helper', 'b'], 'b'), 'b', 'a helper model beside it: the announced one')
  t.equal(modelUsed(['x', 'y'], 'auto'), null, 'others only (gemini routing): none said')
  t.equal(modelUsed(['x', 'y'], undefined), null)
  t.equal(modelUsed([], undefined), null)
})

const usageOf = (steps: Step[]) => steps.filter((step) => step.kind === 'usage').at(-1)
const read = (parser: StepParser, events: unknown[]) =>
  readSteps(parser, Buffer.from(events.map((event) => `${JSON.stringify(event)}\n`).join(''))).steps

t.test('claude: its init line names the model, its result line the models its calls used', async (t) => {
  const init = { type: 'system', subtype: 'init', session_id: 's', model: 'claude-opus-x' }
  const result = (modelUsage: object) => ({ type: 'result', is_error: false, result: 'ok', modelUsage })
  t.match(usageOf(read(claudeSteps(), [init, result({ 'claude-haiku-x': {}, 'claude-opus-x': {} })])), {
    model: 'claude-opus-x'
  }, 'a helper model beside the session\'s')
  t.match(usageOf(read(claudeSteps(), [init, result({})])), { model: 'claude-opus-x' }, 'no call made')
  t.match(usageOf(read(claudeSteps(), [result({ a: {}, b: {} })])), { model: null }, 'two, and no init to choose')
  t.match(usageOf(read(claudeSteps(), [init, result({ 'claude-sonnet-x': {} })])), { model: 'claude-sonnet-x' })
})

t.test('gemini: its init event names the model (auto when it routes), its result stats the models used', async (t) => {
  const init = (model: string) => ({ type: 'init', session_id: 's', model })
  const result = (models: object) => ({ type: 'result', status: 'success', stats: { models } })
  t.match(usageOf(read(geminiSteps(), [init('gemini-pro-x'), result({ 'flash-lite': {}, 'gemini-pro-x': {} })])), {
    model: 'gemini-pro-x'
  })
  t.match(usageOf(read(geminiSteps(), [init('auto'), result({ 'flash-lite': {}, 'gemini-pro-x': {} })])), {
    model: null
  }, 'routed: auto is no model, and two were used')
  t.match(usageOf(read(geminiSteps(), [init('gemini-pro-x'), result({})])), { model: 'gemini-pro-x' })
})

t.test('the real CLIs\' recorded runs: claude and gemini name the model; codex and opencode do not', async (t) => {
  const named = { claude: 'claude-opus-5-5', gemini: 'gemini-2.5-flash', codex: null, opencode: null }
  for (const [agent, model] of Object.entries(named)) {
    const spec = BUILT_IN_AGENTS.find((each) => each.agent === agent)!
    const stream = readFileSync(fromRoot(`test/fixtures/streams/${agent}.out`))
    t.match(usageOf(readSteps(spec.steps!(), stream).steps), { kind: 'usage', model }, agent)
  }
})

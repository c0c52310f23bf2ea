import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { toolNameOf } from '#src/agents/spec.js'
import { loadConfig } from '#src/config.js'
import {
  build, call, createRun, echoed, heldAgent, listen, post, readPidFile, refused, runTool, settled, standInEnv,
  tempDir
} from '../helpers/index.js'
import { runThrough, SURFACES } from '../helpers/surfaces.js'

// A run's `model` (issue 41): a checked name, never an option, reaching each CLI joined to its flag; the operator's
// allow-list (<AGENT>_MODELS) refusing others before any slot, and default (<AGENT>_MODEL); the result's usage.model
// the model the CLI's own stream says it used.

t.jobs = 2

const MODEL = 'vendor/some.model-1:tag@v2'
/** Whose stream says the model it used: claude's and gemini's; codex's and opencode's name none, crush prints text. */
const NAMES_ITS_MODEL = new Set(['claude', 'gemini'])

for (const spec of BUILT_IN_AGENTS) {
  const tool = toolNameOf(spec)
  t.test(`${tool}: the model reaches the CLI as one element, joined to its flag; usage.model as said`, async (t) => {
    const app = await build(t)
    const result = await runTool(app, tool, { task: 'which model?', model: MODEL })
    const { argv, prompt } = echoed(result)
    t.equal(result.ok, true)
    t.equal(prompt, 'which model?')
    t.ok(argv.includes(`--model=${MODEL}`), JSON.stringify(argv))
    t.equal(argv.filter((arg) => arg.includes(MODEL)).length, 1, 'never a value of its own')
    if (argv.includes('--')) t.ok(argv.indexOf(`--model=${MODEL}`) < argv.indexOf('--'), 'before the task\'s `--`')
    t.same(result.command.slice(1), argv, 'the command says it')
    t.equal(result.usage?.model ?? null, NAMES_ITS_MODEL.has(spec.agent) ? MODEL : null, 'the model its stream named')

    const plain = await runTool(app, tool, { task: 'which model?' })
    t.notOk(echoed(plain).argv.some((arg) => arg.startsWith('--model')), 'none asked, none given')
    const longest = 'm'.repeat(128)
    t.ok(echoed(await runTool(app, tool, { task: 'x', model: longest })).argv.includes(`--model=${longest}`), '128')
  })
}

t.test('every route takes it, and an async run\'s state reports the model used', async (t) => {
  const base = await listen(t, await build(t))
  for (const surface of SURFACES) {
    const { result } = await runThrough(surface, base, 'gemini_run', { task: 'hello', model: 'gemini-x' })
    t.ok(echoed(result).argv.includes('--model=gemini-x'), surface)
    t.equal(result.usage?.model, 'gemini-x', surface)
  }
})

t.test('a model that could be read as anything but a name is a 400 VALIDATION_ERROR, and starts nothing', async (t) => {
  const log = join(tempDir(t), 'starts.log')
  const app = await build(t, {}, standInEnv({ STAND_IN_LOG: log }))
  const hostile = [
    '--dangerously-skip-permissions', '-x', '-', '--', 'two words', '$(id)', '`id`', 'a;b', 'a\nb', "it's", 'a=b',
    '', 'm'.repeat(129), ' sonnet'
  ]
  for (const model of hostile) {
    for (const route of ['/tools/claude_run', '/tools/crush_run', '/runs']) {
      const body = { task: 'x', model, ...(route === '/runs' ? { tool: 'codex_run' } : {}) }
      const answer = await call(app, 'POST', route, { body })
      t.match(answer, { status: 400, body: { code: 'VALIDATION_ERROR', message: /model/ } }, `${route} ${model}`)
    }
  }
  t.notOk(existsSync(log) && readFileSync(log, 'utf8').includes('"argv"'), 'no agent started')
})

t.test('<AGENT>_MODELS: a model outside it is a 400 MODEL_NOT_ALLOWED, before any slot', async (t) => {
  const app = await build(t, { MAX_CLAUDE_AGENTS: '1', CLAUDE_MODELS: 'sonnet, haiku' })
  // The only slot is held: a refusal that came after the slot would be a 429.
  const held = heldAgent(t)
  const holder = await createRun(app, { tool: 'claude_run', task: held.task })
  await readPidFile(held.pidFile)
  t.match(await refused(app, 'claude_run', { task: 'x', model: 'opus' }), {
    status: 400,
    body: {
      code: 'MODEL_NOT_ALLOWED',
      message: 'body/model: claude_run may not use opus; the models it allows: sonnet, haiku'
    }
  })
  t.match(await call(app, 'POST', '/runs', { body: { tool: 'claude_run', task: 'x', model: 'opus' } }), {
    status: 400, body: { code: 'MODEL_NOT_ALLOWED' }
  }, 'async runs too')
  t.match(await refused(app, 'claude_run', { task: 'x', model: 'haiku' }), {
    status: 429, body: { code: 'AGENT_LIMIT_REACHED' }
  }, 'one it allows goes on to the slot')
  held.release()
  await settled(app, holder.id)
  const allowed = await runTool(app, 'claude_run', { task: 'x', model: 'haiku' })
  t.ok(echoed(allowed).argv.includes('--model=haiku'))
  t.ok(echoed(await runTool(app, 'claude_run', { task: 'x' })).argv.every((arg) => !arg.startsWith('--model')),
    'no default: none asked, none given')
  t.ok(echoed(await runTool(app, 'crush_run', { task: 'x', model: 'opus' })).argv.includes('--model=opus'),
    'another tool\'s list is not this one\'s')
})

t.test('<AGENT>_MODEL: the model of a run that names none', async (t) => {
  const app = await build(t, { GEMINI_MODEL: 'gemini-default', GEMINI_MODELS: 'gemini-default,gemini-other' })
  const none = await runTool(app, 'gemini_run', { task: 'x' })
  t.ok(echoed(none).argv.includes('--model=gemini-default'), JSON.stringify(echoed(none).argv))
  t.equal(none.usage?.model, 'gemini-default')
  t.ok(echoed(await runTool(app, 'gemini_run', { task: 'x', model: 'gemini-other' })).argv.includes(
    '--model=gemini-other'
  ), 'one named wins')
  t.equal((await post(app, 'gemini_run', { task: 'x', model: 'gemini-default ' })).status, 400)
  t.notOk(echoed(await runTool(app, 'opencode_run', { task: 'x' })).argv.some((arg) => arg.startsWith('--model')),
    'another tool\'s default is not this one\'s')
})

t.test('the configuration refuses a default outside the list, and names that are no model', async (t) => {
  t.throws(() => loadConfig({ CLAUDE_MODELS: 'sonnet,haiku', CLAUDE_MODEL: 'opus' }),
    /CLAUDE_MODEL=opus is not in CLAUDE_MODELS \(sonnet, haiku\)/)
  t.throws(() => loadConfig({ CODEX_MODELS: 'gpt-5,--yolo' }), /CODEX_MODELS: "--yolo" is no model name/)
  t.throws(() => loadConfig({ CODEX_MODEL: '-m' }), /CODEX_MODEL/)
  const settings = (env: Record<string, string>) =>
    loadConfig(env).agents.find(({ spec }) => spec.agent === 'claude')!.settings
  t.match(settings({ CLAUDE_MODEL: 'opus' }), { models: [], model: 'opus' }, 'a default with no list: any model')
  t.match(settings({ CLAUDE_MODELS: ' sonnet , haiku,', CLAUDE_MODEL: 'haiku' }), {
    models: ['sonnet', 'haiku'], model: 'haiku'
  })
})

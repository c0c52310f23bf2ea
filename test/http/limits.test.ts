import t from 'tap'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadConfig } from '#src/config.js'
import {
  build, call, createRun, heldAgent, listen, readPidFile, refused, runTool, scenario, settled, standInEnv, tempDir
} from '../helpers/index.js'
import { NO_REDIS, redisEnv, startRedis } from '../helpers/redis.js'
import { runThrough, SURFACES } from '../helpers/surfaces.js'

// A run's `limits` (issue 41): each at most its tool's ceiling, refused before any slot when it cannot be held; held
// by the service from the agent's steps (turns, tokens, dollars) and by claude's own flags; crossing one stops the run
// as its deadline does, not ok, `stop_reason` saying which.

t.jobs = 2

/**
 * `count` calls, then the agent waits to be stopped: held to a limit the last call crosses, the run ends on that limit
 * with exactly these steps however slow the machine; a limit not held leaves it to this deadline (`timeout`).
 */
const callsUntilStopped = (count: number) => ({ task: scenario.callsUntilStopped(count), timeout: 30 })

/** The commands a run's steps say it ran, in order. */
const commandsOf = (result: { steps_summary?: { commands: Array<{ command: string }> } | null }): string =>
  (result.steps_summary?.commands ?? []).map(({ command }) => command).join(',')

t.test('limits it cannot be held to: 400 before any slot, and no agent starts', async (t) => {
  const log = join(tempDir(t), 'starts.log')
  const app = await build(t, { MAX_CODEX_AGENTS: '1', MAX_CRUSH_AGENTS: '1', CODEX_MAX_TURNS: '5' },
    standInEnv({ STAND_IN_LOG: log }))
  // The only slots are held: a refusal that came after a slot would be a 429.
  const holders = []
  for (const tool of ['codex_run', 'crush_run'] as const) {
    const held = heldAgent(t)
    holders.push({ held, run: await createRun(app, { tool, task: held.task }) })
    await readPidFile(held.pidFile)
  }
  const starts = () => readFileSync(log, 'utf8').split('\n').filter((line) => line.includes('"argv"')).length
  const before = starts()
  const cases: Array<[string, Record<string, unknown>, string, RegExp | string]> = [
    ['codex_run', { max_turns: 6 }, 'LIMIT_ABOVE_CEILING', 'body/limits/max_turns: 6 is above this tool’s ceiling of 5'
    ],
    ['codex_run', { max_cost_usd: 1 }, 'COST_UNKNOWN', /codex_run reports no cost, and MODEL_PRICES_FILE prices no/],
    ['crush_run', { max_turns: 3 }, 'LIMIT_NOT_SUPPORTED', /crush_run reports no turns, tokens nor cost/],
    ['crush_run', { max_tokens: 3 }, 'LIMIT_NOT_SUPPORTED', /max_tokens/],
    ['codex_run', { max_turns: 0 }, 'VALIDATION_ERROR', /max_turns/],
    ['codex_run', { max_tokens: 1.5 }, 'VALIDATION_ERROR', /max_tokens/],
    ['codex_run', { max_cost_usd: 0 }, 'VALIDATION_ERROR', /max_cost_usd/],
    ['codex_run', { max_cost_usd: '1' }, 'VALIDATION_ERROR', /max_cost_usd/],
    ['codex_run', { max_steps: 3 }, 'VALIDATION_ERROR', /limits/]
  ]
  for (const [tool, limits, code, message] of cases) {
    t.match(await refused(app, tool, { task: 'x', limits }), { status: 400, body: { code, message } },
      `${tool} ${JSON.stringify(limits)}`)
    t.match(await call(app, 'POST', '/runs', { body: { tool, task: 'x', limits } }), {
      status: 400, body: { code }
    }, 'async runs too')
  }
  t.match(await refused(app, 'codex_run', { task: 'x', limits: { max_turns: 5 } }), {
    status: 429, body: { code: 'AGENT_LIMIT_REACHED' }
  }, 'at the ceiling: on to the slot')
  t.equal(starts(), before, 'no agent started for any of them')
  for (const { held, run } of holders) {
    held.release()
    await settled(app, run.id)
  }
})

t.test('max_turns held by the service: codex stopped as its next response begins, not ok, failed', async (t) => {
  const app = await build(t)
  const result = await runTool(app, 'codex_run', { ...callsUntilStopped(3), limits: { max_turns: 2 } })
  t.match(result, { ok: false, stop_reason: 'max_turns', timed_out: false })
  t.equal(result.steps_summary!.turns, 3, 'stopped as its third response began')
  // The third call comes in the turn that crossed the limit: read or not before the stop lands, depending on how its
  // output was chunked; never a call it did not make.
  t.match(commandsOf(result), /^echo call 1,echo call 2(,echo call 3)?$/, 'the calls before the limit, in order')
  const async = await createRun(app, { tool: 'codex_run', ...callsUntilStopped(2), limits: { max_turns: 1 } })
  t.match(await settled(app, async.id), {
    status: 'failed', limits: { max_turns: 1 }, result: { stop_reason: 'max_turns' }
  }, 'its state says the limit it was held to')
  const within = await runTool(app, 'codex_run', { task: scenario.toolCalls(2, 1), limits: { max_turns: 3 } })
  t.match(within, { ok: true, stop_reason: null, output: '2 calls', steps_summary: { turns: 3 } }, 'reached, not past')
})

t.test('a ceiling is every run’s limit when it names none, lowered by one that names less', async (t) => {
  const app = await build(t, { GEMINI_MAX_TURNS: '2', CLAUDE_MAX_TURNS: '4', GEMINI_MODEL: 'gemini-x' })
  const listed = await createRun(app, { tool: 'gemini_run', task: 'x', limits: { max_tokens: 100 } })
  const state = await settled(app, listed.id)
  t.same([state.model, state.limits], ['gemini-x', { max_turns: 2, max_tokens: 100 }], 'what its state says')
  t.match(await runTool(app, 'gemini_run', callsUntilStopped(3)), { ok: false, stop_reason: 'max_turns' })
  const lowered = await runTool(app, 'gemini_run', { ...callsUntilStopped(2), limits: { max_turns: 1 } })
  t.match(lowered, { stop_reason: 'max_turns', steps_summary: { turns: 2 } })
  t.match(commandsOf(lowered), /^echo call 1(,echo call 2)?$/, 'the call before the limit, and at most the one after')
  const claude = await runTool(app, 'claude_run', { task: scenario.toolCalls(1, 1) })
  t.ok(claude.command.includes('--max-turns=4'), 'the ceiling given to claude too')
})

t.test('claude stops itself at the limits it is given: --max-turns, --max-budget-usd; its subtype the reason',
  async (t) => {
    const app = await build(t)
    const limits = { max_turns: 2, max_cost_usd: 0.5 }
    const result = await runTool(app, 'claude_run', { ...callsUntilStopped(3), limits })
    t.ok(result.command.includes('--max-turns=2') && result.command.includes('--max-budget-usd=0.5'),
      JSON.stringify(result.command))
    t.match(result, {
      ok: false, stop_reason: 'max_turns', agent_report: { subtype: 'error_max_turns' }, steps_summary: { turns: 2 }
    })
    t.equal(result.steps_summary!.commands.length, 2, 'its own stop: no response past the limit begun')
    t.notOk((await runTool(app, 'claude_run', { task: 'x' })).command.some((arg) => arg.startsWith('--max-')),
      'no limits, no flags')
  })

t.test('max_tokens and max_cost_usd from opencode’s steps, which report each call’s tokens and cost', async (t) => {
  const app = await build(t, {}, standInEnv({ OPENCODE_STAND_IN_STEP_COST: '0.001' }))
  // 15 tokens a step: the third, the agent's last, is past 40.
  const tokens = await runTool(app, 'opencode_run', { ...callsUntilStopped(3), limits: { max_tokens: 40 } })
  t.match(tokens, { ok: false, stop_reason: 'max_tokens', usage: { input_tokens: 30, output_tokens: 15 } })
  const cost = await runTool(app, 'opencode_run', { ...callsUntilStopped(3), limits: { max_cost_usd: 0.0025 } })
  t.match(cost, { ok: false, stop_reason: 'max_cost' })
  t.equal(cost.usage!.cost_usd!.toFixed(6), '0.003000', 'three steps of $0.001: past $0.0025')
  t.match(await runTool(app, 'opencode_run', { task: scenario.toolCalls(2, 1), limits: { max_tokens: 45 } }), {
    ok: true, stop_reason: null, usage: { input_tokens: 30, output_tokens: 15 }
  }, 'three steps of 15: 45 is within')
})

t.test('MODEL_PRICES_FILE prices what a CLI reports no cost for; a limit crossed as the agent ends still counts',
  async (t) => {
    const prices = join(tempDir(t), 'prices.json')
    writeFileSync(prices, JSON.stringify({ 'codex-priced': { input_usd_per_mtok: 100, output_usd_per_mtok: 1000 } }))
    const app = await build(t, { MODEL_PRICES_FILE: prices, CODEX_MODEL: 'codex-priced' })
    // codex reports 10 + 5 tokens once its turn completes: 0.001 + 0.005 dollars.
    const priced = await runTool(app, 'codex_run', { task: 'x' })
    t.match(priced, { ok: true, usage: { input_tokens: 10, output_tokens: 5 } })
    t.equal(priced.usage!.cost_usd!.toFixed(6), '0.006000', 'from the table')
    // Its usage is its last line: read as it exits, or once it has (exit code 0): over its limit either way.
    t.match(await runTool(app, 'codex_run', { task: 'x', limits: { max_cost_usd: 0.005 } }), {
      ok: false, stop_reason: 'max_cost'
    }, 'its usage came last: the run is over its limit all the same')
    t.match(await refused(app, 'codex_run', { task: 'x', model: 'other', limits: { max_cost_usd: 1 } }), {
      status: 400, body: { code: 'COST_UNKNOWN', message: /prices no other/ }
    }, 'a model the table does not price')
  })

t.test('every route takes limits', async (t) => {
  const base = await listen(t, await build(t))
  for (const surface of SURFACES) {
    const params = { ...callsUntilStopped(2), limits: { max_turns: 1 } }
    const { result } = await runThrough(surface, base, 'codex_run', params)
    t.match(result, { ok: false, stop_reason: 'max_turns' }, surface)
  }
})

t.test('the configuration: ceilings a tool cannot be held to, and a price table it cannot read, stop the start',
  async (t) => {
    t.throws(() => loadConfig({ CRUSH_MAX_TURNS: '3' }), /CRUSH_MAX_TURNS: crush prints plain text/)
    t.throws(() => loadConfig({ CLAUDE_MAX_COST_USD: '0' }), /CLAUDE_MAX_COST_USD/)
    const dir = tempDir(t)
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text)
      return join(dir, name)
    }
    t.throws(() => loadConfig({ MODEL_PRICES_FILE: file('a', '{') }), /MODEL_PRICES_FILE=.* cannot be read as JSON/)
    t.throws(() => loadConfig({ MODEL_PRICES_FILE: file('b', '{"m": {"input_usd_per_mtok": 1}}') }),
      /MODEL_PRICES_FILE=.*: \/m\/output_usd_per_mtok Expected required property/)
    t.throws(() => loadConfig({ MODEL_PRICES_FILE: join(dir, 'none') }), /cannot be read/)
    t.notOk(existsSync(join(dir, 'none')))
    const prices = file('c', '{"m": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 2}}')
    const config = loadConfig({ CODEX_MAX_TOKENS: '1000', MODEL_PRICES_FILE: prices })
    t.same(config.agents.find(({ spec }) => spec.agent === 'codex')!.settings.ceilings, { max_tokens: 1000 })
    t.same(config.modelPrices, { m: { input_usd_per_mtok: 1, output_usd_per_mtok: 2 } })
  })

/** Two tokens whose agents share the service's user: each token's spend is its own all the same. */
const TWO_TOKENS = {
  API_TOKENS: 'alice:alice-secret-0123456789,bob:bob-secret-0123456789', ALLOW_SHARED_AGENT_USER: 'true'
}
const as = (who: string) => ({ authorization: `Bearer ${who}-secret-0123456789` })

t.test('TOKEN_DAILY_COST_USD: a token’s runs hold to what its day leaves; spent, 429 before any slot', async (t) => {
  const log = join(tempDir(t), 'starts.log')
  const app = await build(t, { ...TWO_TOKENS, TOKEN_DAILY_COST_USD: 'alice:0.02' }, standInEnv({ STAND_IN_LOG: log }))
  // The claude stand-in reports a cost of 0.0123 as it ends.
  const first = await runTool(app, 'claude_run', { task: 'x' }, as('alice'))
  t.match(first, { ok: true, usage: { cost_usd: 0.0123 } })
  t.ok(first.command.includes('--max-budget-usd=0.02'), 'claude told what the day leaves')
  const second = await runTool(app, 'claude_run', { task: 'y', limits: { max_cost_usd: 0.5 } }, as('alice'))
  t.ok(second.command.includes(`--max-budget-usd=${0.02 - 0.0123}`), 'the day’s rest, below the run’s own limit')
  t.match(second, { ok: false, stop_reason: 'max_cost' }, 'past what the day left it: stopped like a cost limit')
  const starts = readFileSync(log, 'utf8').split('\n').filter((line) => line.includes('"argv"')).length
  t.match(await refused(app, 'claude_run', { task: 'z' }, as('alice')), {
    status: 429,
    body: { code: 'BUDGET_EXHAUSTED', message: 'alice has spent $0.0246 of its $0.02 a day over the last 24 hours' }
  })
  t.match(await call(app, 'POST', '/runs', { body: { tool: 'claude_run', task: 'z' }, headers: as('alice') }), {
    status: 429, body: { code: 'BUDGET_EXHAUSTED' }
  }, 'async runs too')
  t.equal(readFileSync(log, 'utf8').split('\n').filter((line) => line.includes('"argv"')).length, starts,
    'no agent started')
  t.match(await runTool(app, 'claude_run', { task: 'w' }, as('bob')), { ok: true }, 'another token’s day is its own')
  t.notOk((await runTool(app, 'claude_run', { task: 'v' }, as('bob'))).command.some((arg) =>
    arg.startsWith('--max-budget-usd')), 'no ceiling, no limit')
  t.match(await refused(app, 'codex_run', { task: 'x' }, { ...as('alice') }), {
    status: 429, body: { code: 'BUDGET_EXHAUSTED' }
  })
  t.match((await app.inject('/metrics')).body,
    /^agent_runner_rejections_total\{tool="claude_run",reason="BUDGET_EXHAUSTED"\} 2$/m)
})

t.test('TOKEN_DAILY_COST_USD: a budgeted token’s run whose cost nothing says is refused; a bad setting stops the start',
  async (t) => {
    const app = await build(t, { ...TWO_TOKENS, TOKEN_DAILY_COST_USD: 'alice:5' })
    t.match(await refused(app, 'codex_run', { task: 'x' }, as('alice')), {
      status: 400, body: { code: 'COST_UNKNOWN', message: /the token’s daily/ }
    }, 'codex reports no cost and no price table prices its model')
    t.match(await refused(app, 'crush_run', { task: 'x' }, as('alice')), {
      status: 400, body: { code: 'LIMIT_NOT_SUPPORTED' }
    }, 'crush reports nothing')
    t.match(await runTool(app, 'codex_run', { task: 'x' }, as('bob')), { ok: true }, 'bob has no ceiling')
    t.throws(() => loadConfig({ ...TWO_TOKENS, TOKEN_DAILY_COST_USD: 'carol:5' }), /"carol" is no token's name/)
    t.throws(() => loadConfig({ ...TWO_TOKENS, TOKEN_DAILY_COST_USD: 'alice:0' }), /alice's ceiling must be/)
    t.throws(() => loadConfig({ ...TWO_TOKENS, TOKEN_DAILY_COST_USD: 'alice' }), /"" is no token's name/)
    t.same(loadConfig({ TOKEN_DAILY_COST_USD: 'anonymous:2.5' }).dailyCostUsd, { anonymous: 2.5 }, 'no tokens')
  })

t.test('TOKEN_DAILY_COST_USD across a fleet: what one replica’s runs spent, another holds the token to',
  { skip: NO_REDIS }, async (t) => {
    const { url } = await startRedis(t)
    const env = redisEnv(url, { ...TWO_TOKENS, TOKEN_DAILY_COST_USD: 'alice:0.02' })
    const a = await build(t, env)
    const b = await build(t, env)
    t.match(await runTool(a, 'claude_run', { task: 'x' }, as('alice')), { ok: true })
    t.ok((await runTool(b, 'claude_run', { task: 'y' }, as('alice'))).command.includes(
      `--max-budget-usd=${0.02 - 0.0123}`), 'the other replica knows what was spent')
    t.match(await refused(a, 'claude_run', { task: 'z' }, as('alice')), {
      status: 429, body: { code: 'BUDGET_EXHAUSTED' }
    })
  })

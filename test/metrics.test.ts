import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  build, cancelRun, createRun, heldAgent, readPidFile, runTool, scenario, tempDir, until
} from './helpers/index.js'

// Prometheus reads values with Go's ParseFloat, which accepts NaN in any case (prom-client writes "Nan").
const SAMPLE = new RegExp(
  String.raw`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})?` +
    String.raw` (-?[0-9.eE+-]+|[Nn][Aa][Nn]|[+-]Inf)$`
)

/** Every line of the exposition is a comment or a well-formed sample; returns samples keyed by name and labels. */
async function scrape(t: Test, app: FastifyInstance): Promise<Map<string, number>> {
  const response = await app.inject({ method: 'GET', url: '/metrics' })
  t.equal(response.statusCode, 200)
  t.match(response.headers['content-type'], /^text\/plain; version=0\.0\.4/)
  const samples = new Map<string, number>()
  for (const line of response.body.split('\n')) {
    if (line === '' || line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue
    const match = SAMPLE.exec(line)
    if (match === null) {
      t.fail(`not a Prometheus sample: ${line}`)
      continue
    }
    samples.set(`${match[1]}${match[2] ?? ''}`, Number(match[3]))
  }
  return samples
}

t.test('/metrics parses and its counters move after runs and rejections', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '1', API_TOKENS: 'tok' })
  const auth = { authorization: 'Bearer tok' }
  const before = await scrape(t, app)
  t.ok(before.has('process_cpu_user_seconds_total'), 'default process metrics')
  t.equal(before.get('agent_runner_slots_in_use{tool="crush_run"}'), 0)

  const run = (task: string, headers: Record<string, string> = auth) =>
    app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task }, headers })
  await run('hello')
  await run(scenario.fail())
  const held = heldAgent(t)
  const holding = run(held.task)
  await readPidFile(held.pidFile)
  const during = await scrape(t, app)
  t.equal(during.get('agent_runner_slots_in_use{tool="crush_run"}'), 1, 'slots in use while a run is in flight')
  t.equal((await run('one too many')).statusCode, 429)
  held.release()
  await holding
  t.equal((await run('x', {})).statusCode, 401)
  t.equal(
    (await app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: '' }, headers: auth })).statusCode,
    400
  )

  const after = await scrape(t, app)
  t.equal(after.get('agent_runner_runs_total{tool="crush_run",outcome="succeeded"}'), 2)
  t.equal(after.get('agent_runner_runs_total{tool="crush_run",outcome="failed"}'), 1)
  t.equal(after.get('agent_runner_run_duration_seconds_count{tool="crush_run"}'), 3)
  t.equal(after.get('agent_runner_rejections_total{tool="crush_run",reason="AGENT_LIMIT_REACHED"}'), 1)
  t.equal(after.get('agent_runner_rejections_total{tool="crush_run",reason="UNAUTHORIZED"}'), 1)
  t.equal(after.get('agent_runner_rejections_total{tool="crush_run",reason="VALIDATION_ERROR"}'), 1)
  t.equal(after.get('agent_runner_slots_in_use{tool="crush_run"}'), 0)
})

t.test('async runs count the same way', async (t) => {
  const app = await build(t, { MAX_CLAUDE_AGENTS: '1' })
  const create = (payload: object) => app.inject({ method: 'POST', url: '/runs', payload })
  const running = await createRun(app, { tool: 'claude_run', task: heldAgent(t).task })
  t.equal((await create({ tool: 'claude_run', task: 'x' })).statusCode, 429)
  t.equal((await create({ task: 'no tool' })).statusCode, 400)
  t.match(await cancelRun(app, running.id), { status: 'cancelled' })
  const samples = await scrape(t, app)
  t.equal(samples.get('agent_runner_rejections_total{tool="claude_run",reason="AGENT_LIMIT_REACHED"}'), 1)
  t.equal(samples.get('agent_runner_rejections_total{tool="unknown",reason="VALIDATION_ERROR"}'), 1)
  t.equal(samples.get('agent_runner_runs_total{tool="claude_run",outcome="cancelled"}'), 1)
})

t.test('timeouts count as timed_out', async (t) => {
  const app = await build(t)
  t.match(await runTool(app, 'claude_run', { task: scenario.sleep(5000), timeout: 1 }), { timed_out: true })
  const samples = await scrape(t, app)
  t.equal(samples.get('agent_runner_runs_total{tool="claude_run",outcome="timed_out"}'), 1)
})

t.test('MCP refusals count as REST ones do, under their tool and code', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '1' })
  const call = (name: string, args: object) => app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { accept: 'application/json, text/event-stream' },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }
  })
  const held = heldAgent(t)
  const holding = runTool(app, 'crush_run', { task: held.task })
  await readPidFile(held.pidFile)
  t.match((await call('crush_run', { task: 'one too many' })).body, /Limite de 1 agent atteinte/)
  t.match((await call('crush_run', { task: '' })).body, /body\/task/)
  t.match((await call('nope_run', { task: 'x' })).body, /Unknown tool/)
  held.release()
  await holding
  const samples = await scrape(t, app)
  t.equal(samples.get('agent_runner_rejections_total{tool="crush_run",reason="AGENT_LIMIT_REACHED"}'), 1)
  t.equal(samples.get('agent_runner_rejections_total{tool="crush_run",reason="VALIDATION_ERROR"}'), 1)
  t.equal(samples.get('agent_runner_rejections_total{tool="unknown",reason="VALIDATION_ERROR"}'), 1)
})

t.test('spend: each token’s runs’ tokens and dollars, by tool, as their results say them', async (t) => {
  const prices = join(tempDir(t), 'prices.json')
  writeFileSync(prices, JSON.stringify({ priced: { input_usd_per_mtok: 100, output_usd_per_mtok: 200 } }))
  const app = await build(t, {
    API_TOKENS: 'alice:alice-secret-0123456789,bob:bob-secret-0123456789', MODEL_PRICES_FILE: prices
  })
  const as = (who: string) => ({ authorization: `Bearer ${who}-secret-0123456789` })
  // The codex stand-in reports 10 input and 5 output tokens a run; claude's its own cost, 0.0123, and no tokens.
  const runs = [
    await runTool(app, 'codex_run', { task: 'x', model: 'priced' }, as('alice')),
    await runTool(app, 'codex_run', { task: 'y', model: 'priced' }, as('alice')),
    await runTool(app, 'codex_run', { task: 'z' }, as('bob')),
    await runTool(app, 'claude_run', { task: 'w' }, as('bob'))
  ]
  t.same(runs.map((result) => result.usage?.cost_usd), [0.002, 0.002, null, 0.0123], 'as each result says')
  await runTool(app, 'crush_run', { task: 'plain text: no usage' }, as('bob'))
  const samples = await scrape(t, app)
  t.equal(samples.get('agent_runner_tokens_total{caller="alice",tool="codex_run",kind="input"}'), 20)
  t.equal(samples.get('agent_runner_tokens_total{caller="alice",tool="codex_run",kind="output"}'), 10)
  t.equal(samples.get('agent_runner_tokens_total{caller="bob",tool="codex_run",kind="input"}'), 10)
  t.equal(samples.get('agent_runner_cost_usd_total{caller="alice",tool="codex_run"}'), 0.004)
  t.notOk(samples.has('agent_runner_cost_usd_total{caller="bob",tool="codex_run"}'), 'no cost known: none counted')
  t.equal(samples.get('agent_runner_cost_usd_total{caller="bob",tool="claude_run"}'), 0.0123)
  t.notOk([...samples.keys()].some((key) => key.includes('crush_run') && key.startsWith('agent_runner_tokens')))
})

t.test('the queue: runs waiting per tool, and how long each run waited for its slot', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '1' })
  const held = heldAgent(t)
  const holding = runTool(app, 'crush_run', { task: held.task })
  await readPidFile(held.pidFile)
  const waiting = runTool(app, 'crush_run', { task: 'after the holder', queue_timeout: 60 })
  const during = await until(
    () => scrape(t, app), (samples) => samples.get('agent_runner_queued{tool="crush_run"}') === 1, 10_000, 'its wait'
  )
  t.equal(during.get('agent_runner_queued{tool="claude_run"}'), 0)
  // The holder got its slot at once; the other waits at least this long.
  await new Promise((resolve) => setTimeout(resolve, 300))
  held.release()
  await Promise.all([holding, waiting])
  const after = await scrape(t, app)
  t.equal(after.get('agent_runner_queued{tool="crush_run"}'), 0)
  t.equal(after.get('agent_runner_queue_wait_seconds_count{tool="crush_run"}'), 2, 'both runs that got a slot')
  t.equal(after.get('agent_runner_queue_wait_seconds_bucket{le="0.25",tool="crush_run"}'), 1, 'one at once')
  t.ok(after.get('agent_runner_queue_wait_seconds_sum{tool="crush_run"}')! >= 0.3, 'the other, its wait')
})

import t from 'tap'
import { build, call, heldAgent, post, readPidFile, refused, runTool } from '../helpers/index.js'

// Per-tool limits (src/slots/limiter.ts): MAX_<AGENT>_AGENTS live agents per tool, a 429 past it, each slot held for
// exactly its agent's life.

t.test('N+1 requests while N run: 429 with the French message, limits independent per tool, slots freed after', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '2', MAX_CLAUDE_AGENTS: '1' })
  // Held until released: the slots are taken for as long as the test needs.
  const crushAgents = [heldAgent(t), heldAgent(t)]
  const running = crushAgents.map((agent) => runTool(app, 'crush_run', { task: agent.task }))
  await Promise.all(crushAgents.map((agent) => readPidFile(agent.pidFile)))

  const tooMany = await refused(app, 'crush_run', { task: 'one too many' })
  t.equal(tooMany.status, 429)
  t.same(tooMany.body, {
    statusCode: 429,
    error: 'Too Many Requests',
    code: 'AGENT_LIMIT_REACHED',
    message: 'Limite de 2 agents atteinte'
  })

  t.match(await runTool(app, 'claude_run', { task: 'independent limit' }), { ok: true }, 'claude has slots of its own')

  const claudeAgent = heldAgent(t)
  const claudeRunning = runTool(app, 'claude_run', { task: claudeAgent.task })
  await readPidFile(claudeAgent.pidFile)
  const claudeRefused = await refused(app, 'claude_run', { task: 'x' })
  t.equal(claudeRefused.status, 429)
  t.equal(claudeRefused.body.message, 'Limite de 1 agent atteinte')

  for (const agent of [...crushAgents, claudeAgent]) agent.release()
  for (const result of await Promise.all([...running, claudeRunning])) t.match(result, { ok: true, output: /^released\n?$/ })
  t.equal(app.slots.inUse('crush_run'), 0)
  t.equal(app.slots.inUse('claude_run'), 0)
  t.equal((await post(app, 'crush_run', { task: 'after' })).status, 200, 'a freed slot serves again')
})

t.test('GET /tools counts slots while runs are in flight', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '3', MAX_CLAUDE_AGENTS: '1' })
  const status = async () => (await call(app, 'GET', '/tools')).body.tools
  t.same(await status(), [
    { name: 'crush_run', agent: 'crush', limit: 3, in_use: 0, free: 3 },
    { name: 'claude_run', agent: 'claude', limit: 1, in_use: 0, free: 1 },
    { name: 'gemini_run', agent: 'gemini', limit: 2, in_use: 0, free: 2 },
    { name: 'codex_run', agent: 'codex', limit: 2, in_use: 0, free: 2 },
    { name: 'opencode_run', agent: 'opencode', limit: 2, in_use: 0, free: 2 }
  ])
  const agents = [heldAgent(t), heldAgent(t), heldAgent(t)]
  const runs = agents.map((agent, index) => runTool(app, index < 2 ? 'crush_run' : 'claude_run', { task: agent.task }))
  await Promise.all(agents.map((agent) => readPidFile(agent.pidFile)))
  t.same(await status(), [
    { name: 'crush_run', agent: 'crush', limit: 3, in_use: 2, free: 1 },
    { name: 'claude_run', agent: 'claude', limit: 1, in_use: 1, free: 0 },
    { name: 'gemini_run', agent: 'gemini', limit: 2, in_use: 0, free: 2 },
    { name: 'codex_run', agent: 'codex', limit: 2, in_use: 0, free: 2 },
    { name: 'opencode_run', agent: 'opencode', limit: 2, in_use: 0, free: 2 }
  ])
  for (const agent of agents) agent.release()
  await Promise.all(runs)
  t.match(await status(), [{ in_use: 0 }, { in_use: 0 }])
})

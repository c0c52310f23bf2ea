import t from 'tap'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { toolNameOf } from '#src/agents/spec.js'
import { build, call, heldAgent, post, readPidFile, refused, runTool } from '../helpers/index.js'

// Per-tool limits (src/slots/limiter.ts): MAX_<AGENT>_AGENTS live agents per tool, a 429 past it, each slot held for
// exactly its agent's life.

t.test('N+1 requests while N run: 429 with the French message, limits independent per tool, ' +
  'slots freed after', async (t) => {
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
  for (const result of await Promise.all([...running, claudeRunning])) {
    t.match(result, { ok: true, output: /^released\n?$/ })
  }
  t.equal(app.slots.inUse('crush_run'), 0)
  t.equal(app.slots.inUse('claude_run'), 0)
  t.equal((await post(app, 'crush_run', { task: 'after' })).status, 200, 'a freed slot serves again')
})

t.test('GET /tools counts slots while runs are in flight', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '3', MAX_CLAUDE_AGENTS: '1' })
  const status = async () => (await call(app, 'GET', '/tools')).body.tools
  // Every agent of the catalog, in its order: those not configured here at MAX_<AGENT>_AGENTS's default, 2.
  const limits: Record<string, number> = { crush_run: 3, claude_run: 1 }
  const expected = (inUse: Record<string, number>) => BUILT_IN_AGENTS.map((spec) => {
    const name = toolNameOf(spec)
    const limit = limits[name] ?? 2
    return { name, agent: spec.agent, limit, in_use: inUse[name] ?? 0, free: limit - (inUse[name] ?? 0), queued: 0 }
  })
  t.same(await status(), expected({}))
  const agents = [heldAgent(t), heldAgent(t), heldAgent(t)]
  const runs = agents.map((agent, index) => runTool(app, index < 2 ? 'crush_run' : 'claude_run', { task: agent.task }))
  await Promise.all(agents.map((agent) => readPidFile(agent.pidFile)))
  t.same(await status(), expected({ crush_run: 2, claude_run: 1 }))
  for (const agent of agents) agent.release()
  await Promise.all(runs)
  t.same(await status(), expected({}), 'every slot back')
})

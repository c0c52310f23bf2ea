import t from 'tap'
import { request } from 'node:http'
import { join } from 'node:path'
import { build, isAlive, listen, post, readPidFile, tempDir, waitFor } from './helper.js'

t.test('N+1 requests while N run: 429 with the French message, limits independent per tool, slots freed after', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '2', MAX_CLAUDE_AGENTS: '1' })
  const running = [post(app, 'crush_run', { task: '@sleep 1500' }), post(app, 'crush_run', { task: '@sleep 1500' })]
  await waitFor(() => app.slots.inUse('crush_run') === 2, 5000, 'two crush runs')

  const refused = await post(app, 'crush_run', { task: 'one too many' })
  t.equal(refused.status, 429)
  t.same(refused.body, {
    statusCode: 429,
    error: 'Too Many Requests',
    code: 'AGENT_LIMIT_REACHED',
    message: 'Limite de 2 agents atteinte'
  })

  const claude = await post(app, 'claude_run', { task: 'independent limit' })
  t.equal(claude.status, 200, 'claude has slots of its own')

  const claudeRunning = post(app, 'claude_run', { task: '@sleep 1000' })
  await waitFor(() => app.slots.inUse('claude_run') === 1, 5000, 'one claude run')
  const claudeRefused = await post(app, 'claude_run', { task: 'x' })
  t.equal(claudeRefused.status, 429)
  t.equal(claudeRefused.body.message, 'Limite de 1 agent atteinte')

  for (const answer of await Promise.all([...running, claudeRunning])) t.equal(answer.status, 200)
  t.equal(app.slots.inUse('crush_run'), 0)
  t.equal(app.slots.inUse('claude_run'), 0)
  t.equal((await post(app, 'crush_run', { task: 'after' })).status, 200, 'a freed slot serves again')
})

t.test('at the deadline the whole group stops: SIGINT lets crush wind down, then its orphans are killed', async (t) => {
  const pidFile = join(tempDir(t), 'grandchild.pid')
  const app = await build(t, { AGENT_KILL_GRACE_MS: '300' })
  const { status, body } = await post(app, 'crush_run', { task: `@grandchild ${pidFile}`, timeout: 1 })
  t.equal(status, 200)
  t.match(body, { ok: false, timed_out: true, stop_reason: 'timeout', exit_code: 1, signal: null })
  t.match(body.output, /ERROR context canceled/, 'crush handled SIGINT itself')
  const grandchild = await readPidFile(pidFile)
  await waitFor(() => !isAlive(grandchild), 2000, 'the grandchild to die')
  t.notOk(isAlive(grandchild), 'the grandchild ignoring SIGTERM is gone')
  t.equal(app.slots.inUse('crush_run'), 0)
})

t.test('an agent ignoring SIGINT and SIGTERM is killed after two grace periods, with its grandchild', async (t) => {
  const pidFile = join(tempDir(t), 'grandchild.pid')
  const app = await build(t, { AGENT_KILL_GRACE_MS: '300' })
  const { body } = await post(app, 'crush_run', { task: `@grandchild ${pidFile} stubborn`, timeout: 1 })
  t.match(body, { ok: false, timed_out: true, stop_reason: 'timeout', exit_code: null, signal: 'SIGKILL' })
  t.ok(body.duration_ms >= 1000 + 2 * 300, 'SIGKILL came only after SIGINT and SIGTERM had their grace')
  const grandchild = await readPidFile(pidFile)
  await waitFor(() => !isAlive(grandchild), 2000, 'the grandchild to die')
  t.notOk(isAlive(grandchild), 'no process left behind')
})

t.test('a process that left the group cannot hold the response open', async (t) => {
  const pidFile = join(tempDir(t), 'escaped.pid')
  const app = await build(t)
  const { status, body } = await post(app, 'crush_run', { task: `@escape ${pidFile}`, timeout: 60 })
  const escaped = await readPidFile(pidFile)
  t.teardown(() => process.kill(escaped, 'SIGKILL'))
  t.equal(status, 200)
  t.match(body, { ok: true, exit_code: 0, timed_out: false, output: /escaped/ })
  t.equal(app.slots.inUse('crush_run'), 0)
})

t.test('a client that disconnects stops its agent and frees the slot', async (t) => {
  const pidFile = join(tempDir(t), 'agent.pid')
  const app = await build(t, { MAX_CRUSH_AGENTS: '1' })
  const base = await listen(t, app)
  const client = request(`${base}/tools/crush_run`, { method: 'POST', headers: { 'content-type': 'application/json' } })
  client.on('error', () => {})
  client.end(JSON.stringify({ task: `@write-pid ${pidFile} 60000` }))
  const agent = await readPidFile(pidFile)
  t.ok(isAlive(agent), 'the agent runs')
  client.destroy()
  await waitFor(() => !isAlive(agent), 5000, 'the agent to stop')
  await waitFor(() => app.slots.inUse('crush_run') === 0, 2000, 'the slot to come back')
  const next = await fetch(`${base}/tools/crush_run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ task: 'next' })
  })
  t.equal(next.status, 200, 'the slot serves the next caller')
})

t.test('closing the app stops running agents and still answers their requests', async (t) => {
  const pidFile = join(tempDir(t), 'agent.pid')
  const app = await build(t)
  const pending = post(app, 'crush_run', { task: `@write-pid ${pidFile} 60000` })
  const agent = await readPidFile(pidFile)
  await app.close()
  const { status, body } = await pending
  t.equal(status, 200)
  t.match(body, { ok: false, stop_reason: 'shutdown', timed_out: false })
  t.notOk(isAlive(agent))
})

t.test('no idle timer can cut a long run short; only receiving the request is bounded (edges.test.ts shows both)', async (t) => {
  const app = await build(t, { REQUEST_TIMEOUT_MS: '4000' })
  await listen(t, app)
  t.equal(app.server.timeout, 0, 'no idle timeout on the socket')
  t.equal(app.server.requestTimeout, 4000)
  t.equal(app.server.headersTimeout, 4000, 'headers within the same bound, or 10 s when it is longer')
})

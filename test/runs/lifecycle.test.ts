import t from 'tap'
import { randomUUID } from 'node:crypto'
import { existsSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'
import {
  build, call, FIXTURE_BIN, isAlive, listen, processesMatching, readPidFile, runTool, scenario, standInEnv, tempDir,
  until
} from '../helpers/index.js'

// How a run ends when it does not end by itself (src/process/agent-process.ts, src/runs/registry.ts): its deadline,
// the stop escalation SIGINT → SIGTERM → SIGKILL a grace apart, its client leaving, the service closing.

const gone = (pid: number, what: string) => until(() => isAlive(pid), (alive) => !alive, 10_000, what)

// Each test has its own service and directories, and most of their time is spent waiting out a deadline or a grace
// period: they run side by side.
t.jobs = 3

t.test('at the deadline the whole group stops: SIGINT lets crush wind down, then its orphans are killed', async (t) => {
  const pidFile = join(tempDir(t), 'grandchild.pid')
  const app = await build(t, { AGENT_KILL_GRACE_MS: '300' })
  // 3 s: the stand-in must have set up its SIGINT handler and its grandchild before the deadline, even on a busy
  // machine.
  const result = await runTool(app, 'crush_run', { task: scenario.grandchild(pidFile), timeout: 3 })
  t.match(result, { ok: false, timed_out: true, stop_reason: 'timeout', exit_code: 1, signal: null })
  t.match(result.output, /ERROR context canceled/, 'crush handled SIGINT itself')
  const grandchild = await readPidFile(pidFile)
  t.notOk(await gone(grandchild, 'the grandchild to die'), 'the grandchild ignoring SIGTERM is gone')
  t.equal(app.slots.inUse('crush_run'), 0)
})

t.test('an agent ignoring SIGINT and SIGTERM is killed after two grace periods, with its grandchild', async (t) => {
  const pidFile = join(tempDir(t), 'grandchild.pid')
  const app = await build(t, { AGENT_KILL_GRACE_MS: '300' })
  // The deadline leaves room for a loaded machine (three suites side by side in CI) to start the stand-in and make it
  // deaf first: 3 s once ended a run still loading, which SIGINT stopped.
  const result = await runTool(app, 'crush_run', { task: scenario.grandchild(pidFile, { stubborn: true }), timeout: 8 })
  t.match(result, { ok: false, timed_out: true, stop_reason: 'timeout', exit_code: null, signal: 'SIGKILL' })
  t.ok(result.duration_ms >= 8000 + 2 * 300, 'SIGKILL came only after SIGINT and SIGTERM had their grace')
  const grandchild = await readPidFile(pidFile)
  t.notOk(await gone(grandchild, 'the grandchild to die'), 'no process left behind')
})

t.test('a process that left the group cannot hold the response open', async (t) => {
  const pidFile = join(tempDir(t), 'escaped.pid')
  const app = await build(t)
  const marker = `escaped-${randomUUID()}`
  // Found by its marker, never by the pid on file: in a PID namespace that pid is the namespace's, and on the host it
  // may be anyone's.
  t.teardown(() => {
    for (const line of processesMatching(marker)) {
      try { process.kill(Number(line.trim().split(/\s+/)[0]), 'SIGKILL') } catch {}
    }
  })
  const result = await runTool(app, 'crush_run', { task: scenario.escape(pidFile, marker), timeout: 60 })
  await readPidFile(pidFile)
  t.match(result, { ok: true, exit_code: 0, timed_out: false, output: /escaped/ })
  t.equal(app.slots.inUse('crush_run'), 0)
})

t.test('a client that disconnects stops its agent and frees the slot', async (t) => {
  const pidFile = join(tempDir(t), 'agent.pid')
  const app = await build(t, { MAX_CRUSH_AGENTS: '1' })
  const base = await listen(t, app)
  const client = request(`${base}/tools/crush_run`, { method: 'POST', headers: { 'content-type': 'application/json' } })
  client.on('error', () => {})
  client.end(JSON.stringify({ task: scenario.writePid(pidFile, 60000) }))
  const agent = await readPidFile(pidFile)
  t.ok(isAlive(agent), 'the agent runs')
  client.destroy()
  const after = await until(
    () => ({ alive: isAlive(agent), slots: app.slots.inUse('crush_run') }),
    (state) => !state.alive && state.slots === 0, 5000, 'the agent to stop and its slot to come back'
  )
  t.same(after, { alive: false, slots: 0 }, 'the agent stopped and its slot came back')
  t.equal(
    (await call(base, 'POST', '/tools/crush_run', { body: { task: 'next' } })).status, 200,
    'the slot serves the next caller'
  )
})

t.test('a client that leaves before its agent starts: nothing starts, its slot comes back, ' +
  'the 499 is counted', async (t) => {
  const dir = tempDir(t)
  const starts = join(dir, 'starts.log')
  const probes = join(dir, 'probes.log')
  // A sudo whose probe lasts until the test lets it end: the request waits for it, its slot already taken, its agent
  // not started yet. A fixed sleep here lost the race on a loaded machine (the agent started before the client left).
  const release = `${probes}.release`
  writeFileSync(
    join(dir, 'sudo'),
    '#!/bin/sh\necho probe >> "$SUDO_STAND_IN_LOG"\n' +
      'while [ ! -e "$SUDO_STAND_IN_LOG.release" ]; do sleep 0.02; done\nexit 1\n',
    { mode: 0o755 }
  )
  const app = await build(
    t, { MAX_CRUSH_AGENTS: '1' },
    standInEnv({
      PATH: `${dir}:${FIXTURE_BIN}:${process.env['PATH'] ?? ''}`, STAND_IN_LOG: starts, SUDO_STAND_IN_LOG: probes
    })
  )
  // Teardowns run last first: released before the app closes, which would wait for the probe.
  t.teardown(() => writeFileSync(release, ''))
  const base = await listen(t, app)
  const client = request(`${base}/tools/crush_run`, { method: 'POST', headers: { 'content-type': 'application/json' } })
  client.on('error', () => {})
  client.end(JSON.stringify({ task: 'never starts' }))
  await until(() => existsSync(probes), (probing) => probing, 5000, 'the sudo probe')
  client.destroy()
  const connections = () =>
    new Promise<number>(
      (resolve, reject) => app.server.getConnections((error, count) => error ? reject(error) : resolve(count))
    )
  await until(connections, (count) => count === 0, 5000, 'the service to see its client leave')
  writeFileSync(release, '')
  const rejected = async () => (await app.inject({ method: 'GET', url: '/metrics' })).body
  // Answered (to nobody) once the probe is over and the run finds its client gone.
  t.match(
    await until(rejected, (text) => text.includes('CLIENT_CLOSED_REQUEST'), 5000, 'the run to be abandoned'),
    /^agent_runner_rejections_total\{tool="crush_run",reason="CLIENT_CLOSED_REQUEST"\} 1$/m
  )
  t.equal(app.slots.inUse('crush_run'), 0, 'its slot came back')
  t.notOk(existsSync(starts), 'no agent started')
})

t.test('closing the app stops running agents and still answers their requests', async (t) => {
  const pidFile = join(tempDir(t), 'agent.pid')
  const app = await build(t)
  const pending = runTool(app, 'crush_run', { task: scenario.writePid(pidFile, 60000) })
  const agent = await readPidFile(pidFile)
  await app.close()
  t.match(await pending, { ok: false, stop_reason: 'shutdown', timed_out: false })
  t.notOk(isAlive(agent))
})

t.test('no idle timer can cut a long run short; ' +
  'only receiving the request is bounded (http/connections.test.ts shows both)', async (t) => {
  const app = await build(t, { REQUEST_TIMEOUT_MS: '4000' })
  await listen(t, app)
  t.equal(app.server.timeout, 0, 'no idle timeout on the socket')
  t.equal(app.server.requestTimeout, 4000)
  t.equal(app.server.headersTimeout, 4000, 'headers within the same bound, or 10 s when it is longer')
})

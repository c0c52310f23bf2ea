import t from 'tap'
import { once } from 'node:events'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'
import {
  build, cancelRun, createRun, FIXTURE_BIN, isAlive, listen, post, readPidFile, refused, runTool, scenario, startServer,
  tempDir, until
} from '../test/helpers/index.js'

// Each fault: the right answer, nothing left running, slots free.

t.test('agents killed by signals', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '8' })
  const signals = ['SIGKILL', 'SIGSEGV', 'SIGTERM', 'SIGABRT'] as const
  const answers = await Promise.all(
    signals.flatMap(
      (signal) =>
        [1, 2].map(
          async () => ({ signal, result: await runTool(app, 'crush_run', { task: scenario.killSelf(signal) }) })
        )
    )
  )
  for (const { signal, result } of answers) {
    t.match(result, { ok: false, exit_code: null, signal, stop_reason: null }, signal)
  }
  t.equal(app.slots.inUse('crush_run'), 0)
})

t.test('the binary removed while serving, then put back', async (t) => {
  const dir = tempDir(t)
  const bin = join(dir, 'crush')
  const install = () => writeFileSync(bin, `#!/bin/sh\nexec "${join(FIXTURE_BIN, 'crush')}" "$@"\n`, { mode: 0o755 })
  install()
  const app = await build(t, { CRUSH_BIN: bin, MAX_CRUSH_AGENTS: '1' })
  t.match(await runTool(app, 'crush_run', { task: 'before' }), { ok: true })
  rmSync(bin)
  t.match(await refused(app, 'crush_run', { task: 'during' }), { status: 503, body: { code: 'AGENT_NOT_INSTALLED' } })
  t.equal(app.slots.inUse('crush_run'), 0)
  install()
  t.match(await runTool(app, 'crush_run', { task: 'after' }), { ok: true }, 'the single slot was not lost')
})

t.test('stubborn agents with grandchildren ignoring SIGTERM, several at once, stopped together', async (t) => {
  const dir = tempDir(t)
  const app = await build(t, { MAX_CRUSH_AGENTS: '6', AGENT_KILL_GRACE_MS: '200' })
  const indexes = [0, 1, 2, 3, 4, 5]
  const runs = await Promise.all(indexes.map((index) => createRun(app, {
    tool: 'crush_run', task: scenario.grandchild(join(dir, `${index}.pid`), { stubborn: true })
  })))
  // Stopped once every agent is deaf (its grandchild's pid on file), however long six take to start: a deadline of 3 s
  // could stop one still loading, which SIGINT ends.
  const grandchildren = await Promise.all(indexes.map((index) => readPidFile(join(dir, `${index}.pid`), 30_000)))
  const ended = await Promise.all(runs.map((run) => cancelRun(app, run.id)))
  for (const state of ended) t.match(state, { status: 'cancelled', result: { signal: 'SIGKILL' } })
  t.same(
    await until(() => grandchildren.filter(isAlive), (alive) => alive.length === 0, 3000, 'grandchildren to die'), [],
    'no grandchild left'
  )
  t.equal(app.slots.inUse('crush_run'), 0)
})

t.test('clients disconnecting mid-run, several at once', async (t) => {
  const dir = tempDir(t)
  const app = await build(t, { MAX_CRUSH_AGENTS: '5' })
  const base = await listen(t, app)
  const clients = [0, 1, 2, 3, 4].map((index) => {
    const client = request(`${base}/tools/crush_run`, {
      method: 'POST', headers: { 'content-type': 'application/json' }
    })
    client.on('error', () => {})
    client.end(JSON.stringify({ task: scenario.writePid(join(dir, `${index}.pid`), 60000) }))
    return client
  })
  const agents = await Promise.all([0, 1, 2, 3, 4].map((index) => readPidFile(join(dir, `${index}.pid`))))
  for (const client of clients) client.destroy()
  const after = await until(
    () => ({ alive: agents.filter(isAlive), slots: app.slots.inUse('crush_run') }),
    (state) => state.alive.length === 0 && state.slots === 0, 5000, 'agents stopped, slots back'
  )
  t.same(after, { alive: [], slots: 0 }, 'every agent stopped and every slot came back')
})

t.test('cwd deleted between validation and spawn: 200 or 400 CWD_NOT_FOUND, never a 5xx', async (t) => {
  const root = tempDir(t)
  const app = await build(t, { MAX_CRUSH_AGENTS: '50' })
  const seen = new Set<string>()
  for (let round = 0; round < 60; round++) {
    const cwd = join(root, `dir-${round}`)
    mkdirSync(cwd)
    const answer = post(app, 'crush_run', { task: 'x', cwd })
    // Remove it at a different moment each round, so some removals fall between the check and the spawn.
    await new Promise((resolve) => setTimeout(resolve, round % 6))
    rmSync(cwd, { recursive: true, force: true })
    const { status, body } = await answer
    const code = 'code' in body ? body.code : ''
    seen.add(status === 200 ? '200' : `${status} ${code}`)
    t.ok(status === 200 || (status === 400 && code === 'CWD_NOT_FOUND'), `round ${round}: ${status} ${code}`)
  }
  t.comment(`answers seen: ${[...seen].join(', ')}`)
  t.equal(app.slots.inUse('crush_run'), 0)
})

t.test('SIGTERM to the server with runs in flight, and 1 GB of output in bounded memory', async (t) => {
  const dir = tempDir(t)
  const { child, base } = await startServer(t, { MAX_CRUSH_AGENTS: '6', AGENT_KILL_GRACE_MS: '300' })
  const run = (task: string) => runTool(base, 'crush_run', { task })

  const gigabyte = 1024 * 1024 * 1024
  t.match(await run(scenario.flood(gigabyte)), {
    ok: true, output_truncated: true, output_bytes: gigabyte + Buffer.byteLength('flooded\n')
  })
  const peakKb = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1])
  t.ok(peakKb < 300 * 1024, `peak RSS ${Math.round(peakKb / 1024)} MB while an agent wrote 1 GB`)

  const inFlight = [0, 1, 2, 3, 4].map((index) => run(scenario.writePid(join(dir, `${index}.pid`), 60000)))
  const agents = await Promise.all([0, 1, 2, 3, 4].map((index) => readPidFile(join(dir, `${index}.pid`))))
  const exited = once(child, 'exit')
  child.kill('SIGTERM')
  for (const result of await Promise.all(inFlight)) t.match(result, { stop_reason: 'shutdown' })
  t.same((await exited)[0], 0, 'the server exits 0')
  t.ok(agents.every((pid) => !isAlive(pid)), 'no agent left')
})

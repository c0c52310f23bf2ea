import t, { type Test } from 'tap'
import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import {
  closeSync, constants, existsSync, mkdirSync, openSync, readdirSync, rmSync, symlinkSync, writeFileSync, writeSync
} from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { runAgent } from '#src/process/agent-process.js'
import { chooseHostContainment, whatEscapes } from '#src/process/host-containment.js'
import { exitThroughInit } from '#src/process/posix-signals.js'
import { processGroup } from '#src/process/process-group.js'
import {
  build, buildLogged, call, cancelRun, createRun, heldAgent, isAlive, listen, post, processesLeft, processesMatching,
  readPidFile, runTool, scenario, standInEnv, startServer, tempDir, until, waitFor
} from '../helpers/index.js'
import { asRoot, directoryOf, realUser } from '../helpers/users.js'

// Each mode this host offers, and the fallback forced by configuration. Processes are found by a directory in their
// argv, through /proc (ps): in a PID namespace the pids an agent sees are not the host's.
const namespaceAvailable = (await chooseHostContainment('auto')).containment.mode === 'pid-namespace'
const modes = namespaceAvailable ? (['pid-namespace', 'process-group'] as const) : (['process-group'] as const)

/** The processes of a `@daemons` run still alive: the daemon (own session) and the double-forked grandchild. */
const leftovers = (dir: string) => {
  const lines = processesMatching(dir)
  return {
    daemon: lines.filter((line) => line.includes('"$0/daemon"')).length,
    double: lines.filter((line) => line.includes('"$0/double"')).length
  }
}
const started = (dir: string) => existsSync(join(dir, 'daemon')) && existsSync(join(dir, 'double'))
/**
 * How long an agent may take to start its daemons: 'client gone' builds a service of its own first, which the full
 * suite on two cores (two files at once) has seen take four times its 2.5 s alone.
 */
const DAEMONS_START_MS = 20_000

/** Whatever the outcome, a test ends what it started: a failing one must not leave a daemon to the next. */
function reapEscapees(t: Test, dir: string): void {
  t.teardown(() => {
    try {
      execFileSync('pkill', ['-KILL', '-f', dir])
    } catch {
      // nothing was left
    }
  })
}

// Each test has its own service, directories and processes (found by their own markers): side by side.
t.jobs = 3

t.test('the mode in force is chosen at start and reported by /readyz', async (t) => {
  const app = await build(t, { AGENT_CONTAINMENT: 'auto' })
  const ready = (await app.inject({ method: 'GET', url: '/readyz' })).json()
  t.equal(ready.containment.mode, namespaceAvailable ? 'pid-namespace' : 'process-group')
  t.type(ready.containment.reason, 'string')
  const forced = await build(t, { AGENT_CONTAINMENT: 'process-group', AGENT_LIMITS: 'off' })
  t.match((await forced.inject({ method: 'GET', url: '/readyz' })).json().containment, {
    mode: 'process-group',
    reason: 'AGENT_CONTAINMENT=process-group',
    escapes: /leaves the agent's process group and also clears its environment.*apt-get install tini/
  })
  t.match(
    ready.containment.escapes, namespaceAvailable ? /^nothing/ : /clears its environment/,
    'what can outlive a run, said plainly'
  )
  t.match(
    whatEscapes('process-group', 'darwin'), /leaves the agent's process group \(setsid, daemons\)$/,
    'no /proc to find marks: the group only'
  )
  t.match(whatEscapes('wsl-process-group'), /inside the distro/)
  t.match(whatEscapes('windows-tree'), /taskkill fails/)
  await t.rejects(
    chooseHostContainment('pid-namespace', '/nonexistent'),
    /AGENT_CONTAINMENT=pid-namespace cannot work here: util-linux setpriv and unshare are not on PATH/
  )
  t.equal((await chooseHostContainment('auto', '/nonexistent')).containment.mode, 'process-group', 'auto falls back')
})

t.test('an init reports a death by signal N as 128 + N: read back as the signal', async (t) => {
  t.same(exitThroughInit(137, null), { exitCode: null, signal: 'SIGKILL' })
  t.same(exitThroughInit(130, null), { exitCode: null, signal: 'SIGINT' })
  t.same(exitThroughInit(1, null), { exitCode: 1, signal: null })
  t.same(exitThroughInit(128, null), { exitCode: 128, signal: null })
  t.same(exitThroughInit(null, 'SIGKILL'), { exitCode: null, signal: 'SIGKILL' })
})

// Each mode on a service of its own, side by side; within a mode, one end after another on the same service.
t.test('what an agent started does not outlive its run', { jobs: modes.length }, async (t) => {
  for (const mode of modes) {
    t.test(`${mode}: what an agent started does not outlive its run`, async (t) => {
      const app = await build(t, { AGENT_CONTAINMENT: mode, MAX_CRUSH_AGENTS: '4', AGENT_KILL_GRACE_MS: '200' })
      // The daemon left the agent's group: the namespace holds it, or in process-group mode, its run's mark.
      const expectEnded = async (t: Test, dir: string) => {
        const left = await until(
          () => leftovers(dir), (found) => found.double === 0 && found.daemon === 0, 5000, 'the run to be swept'
        )
        t.same(left, { daemon: 0, double: 0 }, 'nothing is left')
        t.equal(app.slots.inUse('crush_run'), 0)
      }

      await t.test('normal exit', async (t) => {
        const dir = tempDir(t)
        reapEscapees(t, dir)
        t.match(await runTool(app, 'crush_run', { task: scenario.daemons(dir, 0) }), {
          ok: true, output: 'daemons started\n'
        })
        t.ok(started(dir), 'both had started')
        await expectEnded(t, dir)
      })

      await t.test('deadline', async (t) => {
        const dir = tempDir(t)
        reapEscapees(t, dir)
        const result = await runTool(app, 'crush_run', { task: scenario.daemons(dir, 60000), timeout: 3 })
        t.match(result, { timed_out: true, stop_reason: 'timeout', exit_code: 1, output: /context canceled/ })
        t.ok(started(dir))
        await expectEnded(t, dir)
      })

      await t.test('DELETE', async (t) => {
        const dir = tempDir(t)
        reapEscapees(t, dir)
        const created = await createRun(app, { tool: 'crush_run', task: scenario.daemons(dir, 60000) })
        await waitFor(() => started(dir), DAEMONS_START_MS, 'the daemons')
        t.match(await cancelRun(app, created.id), { status: 'cancelled' })
        await expectEnded(t, dir)
      })

      await t.test('client gone', async (t) => {
        const dir = tempDir(t)
        reapEscapees(t, dir)
        const base = await listen(t, await build(t, { AGENT_CONTAINMENT: mode, AGENT_KILL_GRACE_MS: '200' }))
        const client = request(`${base}/tools/crush_run`, {
          method: 'POST', headers: { 'content-type': 'application/json' }
        })
        client.on('error', () => {})
        client.end(JSON.stringify({ task: scenario.daemons(dir, 60000) }))
        await waitFor(() => started(dir), DAEMONS_START_MS, 'the daemons')
        client.destroy()
        await expectEnded(t, dir)
      })

      await t.test('the escalation reaches a stubborn agent and its grandchild', async (t) => {
        const dir = tempDir(t)
        // Stopped by DELETE (the deadline's stop is the same, and shown above): the escalation is what is under test.
        const created = await createRun(app, {
          tool: 'crush_run', task: scenario.grandchild(join(dir, 'pid'), { stubborn: true, markers: [dir] })
        })
        await readPidFile(join(dir, 'pid'))
        t.match(await cancelRun(app, created.id), {
          result: { stop_reason: 'cancelled', exit_code: null, signal: 'SIGKILL' }
        })
        t.same(await processesLeft(dir), [], 'the grandchild ignoring SIGTERM is gone')
      })
    })
  }
})

t.test('process-group mode without cgroups: a daemon that also clears its environment is the one that escapes ' +
  '(docs/operations.md)', async (t) => {
  const app = await build(t, { AGENT_CONTAINMENT: 'process-group', AGENT_LIMITS: 'off' })
  const dir = tempDir(t)
  reapEscapees(t, dir)
  t.match(await runTool(app, 'crush_run', { task: scenario.scrubbed(dir, 0) }), {
    ok: true, output: 'scrubbed daemon started\n'
  })
  const scrubbed = () => processesMatching(dir).filter((line) => line.includes('"$0/scrubbed"')).length
  t.equal(scrubbed(), 1, 'it outlived its run: no mark, no group')
})

t.test('a killed service: the next start stops what its runs left, daemons included, ' +
  'even with no ledger', async (t) => {
  for (const mode of modes) {
    await t.test(mode, async (t) => {
      const dataDir = tempDir(t)
      const dir = tempDir(t)
      reapEscapees(t, dir)
      const first = await startServer(t, { DATA_DIR: dataDir, AGENT_CONTAINMENT: mode })
      await createRun(first.base, { tool: 'crush_run', task: scenario.daemons(dir, 60000) })
      await waitFor(() => started(dir), DAEMONS_START_MS, 'the daemons')
      const exited = once(first.child, 'exit')
      first.child.kill('SIGKILL')
      await exited
      // The ledger names the agent's group only: what left the group is found by its mark.
      rmSync(join(dataDir, 'live'), { recursive: true, force: true })
      if (mode === 'process-group') {
        t.same(leftovers(dir), { daemon: 1, double: 1 }, 'the killed service left them running')
      }
      const second = await startServer(t, { DATA_DIR: dataDir, AGENT_CONTAINMENT: mode })
      // In a PID namespace, the service's death already ended the run (its parent-death signal).
      t.same(
        await until(() => leftovers(dir), (found) => found.daemon === 0 && found.double === 0, 5000, 'nothing left'),
        { daemon: 0, double: 0 }
      )
      if (mode === 'process-group') {
        t.ok(second.logs.some(
          (entry) => /stopped \d+ process\(es\) a previous life's runs left/.test(String(entry['msg']))
        ), 'the start says so')
      }
    })
  }
})

t.test('the Docker image\'s setup (a non-root service, process-group forced): daemons end with their run, ' +
  'and with a killed life', { skip: !asRoot && 'needs root (useradd)' }, async (t) => {
  const user = realUser('ar-image', 'nopasswd')
  const home = directoryOf(t, user)
  const dir = join(home, 'marks')
  execFileSync('install', ['-d', '-o', String(user.uid), '-g', String(user.gid), dir])
  reapEscapees(t, dir)
  const env = {
    DATA_DIR: join(home, 'data'),
    AGENT_WORKDIR: join(home, 'work'),
    AGENT_CONTAINMENT: 'process-group',
    AGENT_KILL_GRACE_MS: '200'
  }
  const first = await startServer(t, env, { user })
  t.match(await runTool(first.base, 'crush_run', { task: scenario.daemons(dir, 0) }), {
    ok: true, output: 'daemons started\n'
  })
  t.same(
    await until(() => leftovers(dir), (found) => found.daemon === 0 && found.double === 0, 5000, 'the run to be swept'),
    { daemon: 0, double: 0 }, 'nothing is left after a normal end'
  )
  rmSync(join(dir, 'daemon'))
  rmSync(join(dir, 'double'))
  await createRun(first.base, { tool: 'crush_run', task: scenario.daemons(dir, 60000) })
  await waitFor(() => started(dir), DAEMONS_START_MS, 'the daemons')
  const exited = once(first.child, 'exit')
  first.child.kill('SIGKILL')
  await exited
  rmSync(join(env.DATA_DIR, 'live'), { recursive: true, force: true })
  t.same(leftovers(dir), { daemon: 1, double: 1 }, 'the killed service left them running')
  await startServer(t, env, { user })
  t.same(
    await until(() => leftovers(dir), (found) => found.daemon === 0 && found.double === 0, 5000, 'nothing left'),
    { daemon: 0, double: 0 }, 'the next start stopped them'
  )
})

t.test('inside the namespace, ps shows the run\'s own processes ' +
  'under its init', { skip: !namespaceAvailable && 'no PID namespaces here' }, async (t) => {
  const app = await build(t, { AGENT_CONTAINMENT: 'pid-namespace' })
  const { output } = await runTool(app, 'crush_run', { task: scenario.ps() })
  const lines = output.trim().split('\n').slice(1, -1)
  t.match(lines[0], new RegExp(`^\\s*1 \\S*tini -g -- crush run -- ${scenario.ps()}$`), 'PID 1 is the init')
  t.ok(
    lines.every((line: string) => /tini|crush|node|ps -eo/.test(line)), `only the run's processes: ${lines.join(' | ')}`
  )
})

t.test('agents killed by signals are reported with the signal in every mode', async (t) => {
  for (const mode of modes) {
    const app: FastifyInstance = await build(t, { AGENT_CONTAINMENT: mode })
    for (const signal of ['SIGKILL', 'SIGSEGV', 'SIGTERM'] as const) {
      t.match(
        await runTool(app, 'crush_run', { task: scenario.killSelf(signal) }), { exit_code: null, signal },
        `${mode}: ${signal}`
      )
    }
  }
})

t.test('a missing agent binary is still a 503 AGENT_NOT_INSTALLED ' +
  'inside the namespace', { skip: !namespaceAvailable && 'no PID namespaces here' }, async (t) => {
  const app = await build(t, { AGENT_CONTAINMENT: 'pid-namespace', CRUSH_BIN: 'no-crush-here' })
  t.match(await post(app, 'crush_run', { task: 'x' }), { status: 503, body: { code: 'AGENT_NOT_INSTALLED' } })
  t.equal(app.slots.inUse('crush_run'), 0)
})

t.test('the ledger holds a record only while an agent runs', async (t) => {
  const dataDir = tempDir(t)
  const app = await build(t, { DATA_DIR: dataDir })
  const live = () => readdirSync(join(dataDir, 'live'))
  const held = heldAgent(t)
  const pending = runTool(app, 'crush_run', { task: held.task })
  t.match(
    await until(live, (records) => records.length === 1, 5000, 'the record'), [/^[0-9a-f-]{36}\.json$/],
    'one record, named by the run'
  )
  held.release()
  await pending
  t.same(live(), [], 'removed once nothing of the run is left')
})

t.test('a run stopped before its agent started spawns nothing: 503 SHUTTING_DOWN', async (t) => {
  const dir = tempDir(t)
  const controller = new AbortController()
  controller.abort('shutdown')
  await t.rejects(
    runAgent({
      command: { file: 'crush', args: ['run', '--', 'x'], cwd: undefined },
      containment: { by: processGroup(), runId: 'abandoned' },
      env: standInEnv(),
      deadline: { timeoutMs: 1000, killGraceMs: 100 },
      output: { limitBytes: 1024 },
      signal: controller.signal
    }),
    { name: 'RunAbandoned', reason: 'shutdown' }
  )
  // Shutdown while a request is certainly before its spawn: held on the sudo probe, whose sudo (first on the agents'
  // PATH) answers only once the test writes to its fifo. Opened read-write, the fifo has a reader from the start: the
  // test's write never waits, and fails if the probe is gone.
  const bin = join(dir, 'bin')
  mkdirSync(bin)
  const fifo = join(dir, 'release')
  execFileSync('mkfifo', [fifo])
  const probing = join(dir, 'probe.pid')
  writeFileSync(
    join(bin, 'sudo'), `#!/bin/sh\nexec 3<>'${fifo}'\necho $$ > '${probing}'\nread -r _ <&3\nexit 1\n`, { mode: 0o755 }
  )
  const { app, lines } = await buildLogged(t, {}, standInEnv({ PATH: `${bin}:${standInEnv()['PATH']}` }))
  const base = await listen(t, app)
  const pending = post(base, 'crush_run', { task: 'late' })
  const probe = await readPidFile(probing)
  t.teardown(() => { try { process.kill(probe, 'SIGKILL') } catch {} })
  const closing = app.close()
  // Its preClose refuses new requests and stops every run in one step: a 503 SHUTTING_DOWN means this run is stopped.
  // A service that no longer listens has closed without waiting for the run, and is no answer either.
  const health = () => call(base, 'GET', '/healthz').catch((error: unknown) => ({ status: 0, body: String(error) }))
  const refusal = await until(health, (answer) => answer.status !== 200, 5000, 'the service to refuse requests')
  t.match(refusal, { status: 503, body: { code: 'SHUTTING_DOWN' } }, 'shutdown has begun')
  t.ok(isAlive(probe), 'while the request still waits on its probe')
  const release = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK)
  writeSync(release, '\n')
  closeSync(release)
  t.match(await pending, { status: 503, body: { code: 'SHUTTING_DOWN' } }, 'the request is answered as shut out')
  t.equal(app.slots.inUse('crush_run'), 0, 'its slot back')
  // Logged as the spawn returns, before anything could stop the agent: an agent killed at once still shows here.
  t.notOk(lines.some((line) => JSON.parse(line).msg === 'agent run started'), 'no agent started')
  await closing
})

t.test('auto falls back when the namespace chain fails to run, and says why', async (t) => {
  const tools = tempDir(t)
  for (const name of ['setpriv', 'unshare', 'tini']) symlinkSync('/bin/false', join(tools, name))
  const chosen = await chooseHostContainment('auto', tools)
  t.equal(chosen.containment.mode, 'process-group')
  t.match(chosen.reason, process.getuid!() === 0 ? /unshare --pid --mount-proc failed/ : /user and PID namespace/)
  await t.rejects(chooseHostContainment('pid-namespace', tools), /AGENT_CONTAINMENT=pid-namespace cannot work here/)
})

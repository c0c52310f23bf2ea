import t, { type Test } from 'tap'
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { closeSync, openSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { startServer, tempDir, waitFor } from '../test/helpers/index.js'
import { NO_REDIS, redisEnv, startRedis } from '../test/helpers/redis.js'
import { NO_AGENT_HERE } from '../test/fleet/fleet-hosts.js'
import { missingTools, prepareWine, ROOT, windowsPath, type WineSetup } from './setup.js'

// The real service, built for Node, run as a Windows program (node.exe under Wine), with native Windows stand-ins:
// what a Windows host does with argv, .cmd shims, process trees and Ctrl-C.

const run = promisify(execFile)
const missing = missingTools()
if (missing !== null) {
  t.plan(0, `Wine cannot run here: ${missing}`)
  process.exit(0)
}
const wine: WineSetup = await prepareWine()

interface WindowsServer {
  child: ChildProcess
  base: string
  log: () => Array<Record<string, unknown>>
}

/**
 * Starts dist/server.js under Wine. Its stdout is a file: a Linux pipe as node.exe's stdout fails (EBADF). A fleet's
 * worker (ROLE=worker) listens to nothing: it is started once it says it is ready, its `base` empty.
 */
async function startWindowsServer(t: Test, env: Record<string, string>): Promise<WindowsServer> {
  const dir = tempDir(t)
  const logFile = join(dir, 'server.log')
  const out = openSync(logFile, 'w')
  // Through sh: tap adds its hooks to NODE_OPTIONS in every child it sees spawned, and node.exe would load them.
  const child = spawn('sh', [
    '-c', 'unset NODE_OPTIONS; exec wine "$@"', 'sh', wine.nodeExe, join(ROOT, 'dist', 'server.js')
  ], {
    cwd: dir,
    env: {
      ...wine.env,
      // Prepended to the Windows PATH: the shims, node.exe for them, and the native stand-ins (taskkill first).
      WINEPATH: [wine.standIns, wine.shims, join(wine.nodeExe, '..')].map(windowsPath).join(';'),
      PORT: '0',
      LOG_LEVEL: 'info',
      DATA_DIR: windowsPath(join(dir, 'data')),
      // better-sqlite3 here is built for Linux; on a real Windows host npm ci fetches its Windows build.
      RUNS_STORE: 'memory',
      AGENT_KILL_GRACE_MS: '300',
      ...env
    },
    stdio: ['ignore', out, out]
  })
  closeSync(out)
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  const log = () =>
    readFileSync(logFile, 'utf8').split('\n').filter((line) => line.startsWith('{')).map(
      (line) => JSON.parse(line) as Record<string, unknown>
    )
  let base = ''
  const worker = env['ROLE'] === 'worker'
  const ready = (): boolean => log().some((entry) => String(entry['msg']).startsWith('agent-runner ready'))
  await waitFor(() => {
    const listening = log().map(
      (entry) => /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(String(entry['msg']))
    ).find(Boolean)
    if (listening) base = listening[1]!
    return (worker ? ready() : base !== '') || child.exitCode !== null
  }, 60_000, 'the Windows service to listen')
  if (child.exitCode !== null) throw new Error(`the service exited: ${readFileSync(logFile, 'utf8')}`)
  return { child, base, log }
}

const postJson = async (base: string, path: string, body: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body)
  })
  return { status: response.status, body: (await response.json()) as any }
}

/** Whether a Windows pid still runs, asked inside Wine (its tasklist is a stub). */
async function windowsProcessAlive(pid: number): Promise<boolean> {
  try {
    await run('wine', [join(wine.standIns, 'alive.exe'), String(pid)], { env: wine.env })
    return true
  } catch {
    return false
  }
}

// What cmd.exe would expand, split or escape, and what MSVCRT quoting gets wrong when done by hand.
const TASK = 'Fix %PATH% and !DELAYED! ^& a | b > c "quoted \\"inner\\"" C:\\dir\\ trailing\\ é€😀 \\'

t.test('the task reaches a Windows agent byte for byte: a native .exe, ' +
  'and an npm .cmd shim never read by cmd.exe', async (t) => {
  const server = await startWindowsServer(t, { CLAUDE_BIN: windowsPath(join(wine.standIns, 'argv.exe')) })
  const native = await postJson(server.base, '/tools/claude_run', { task: TASK })
  t.equal(native.status, 200)
  const received = JSON.parse(native.body.output) as { argv: string[]; stdin: string }
  t.same(
    received.argv, ['-p', '--output-format', 'stream-json', '--verbose', '--permission-mode', 'bypassPermissions'],
    'argv.exe got each argument exactly, and no task among them'
  )
  t.equal(
    Buffer.from(received.stdin, 'latin1').toString('utf8'), TASK, 'the task came on its standard input, byte for byte'
  )

  // crush is found by its bare name as crush.cmd through PATHEXT, and started as node + the script the shim names.
  const shim = await postJson(server.base, '/tools/crush_run', { task: TASK })
  t.equal(shim.status, 200)
  const echoed = JSON.parse(shim.body.output.split('\n').find((line: string) => line.startsWith('{"agent"')))
  t.equal(echoed.prompt, TASK, 'the prompt crush received is the task')

  const ready = await (await fetch(`${server.base}/readyz`)).json()
  t.match(ready, { containment: { mode: 'windows-tree' }, agents: [{ tool: 'crush_run', path: /crush\.cmd$/i }] })

  const quotes = '"'.repeat(20_000)
  const tooLong = await postJson(server.base, '/tools/crush_run', { task: quotes })
  t.match(
    tooLong, { status: 400, body: { code: 'COMMAND_LINE_TOO_LONG' } },
    'over 32,767 characters: a 400, not a failed spawn'
  )
  const onStdin = await postJson(server.base, '/tools/claude_run', { task: quotes })
  t.equal(onStdin.status, 200, 'the same task on standard input: no command line to limit it')
  t.equal(Buffer.from(JSON.parse(onStdin.body.output).stdin, 'latin1').toString('utf8'), quotes, 'and it arrived whole')
})

t.test('at the deadline the agent and its grandchild are ended as a tree', async (t) => {
  const dir = tempDir(t)
  const killed = join(dir, 'taskkill.log')
  const server = await startWindowsServer(t, { TASKKILL_STAND_IN_LOG: windowsPath(killed) })
  const pidFile = join(dir, 'grandchild.pid')
  const { status, body } = await postJson(server.base, '/tools/crush_run', {
    task: `@grandchild ${windowsPath(pidFile)}`, timeout: 1
  })
  t.equal(status, 200)
  t.match(body, { ok: false, timed_out: true, stop_reason: 'timeout', processes_may_remain: false })
  t.ok(body.duration_ms >= 1000 + 2 * 300, 'asked twice (taskkill without /F), then forced')
  const grandchild = Number(readFileSync(pidFile, 'utf8'))
  const terminated = readFileSync(killed, 'utf8').split(/\r?\n/)
  t.ok(
    terminated.includes(String(grandchild)),
    `taskkill /T /F reached the grandchild ${grandchild}: ${terminated.join(',')}`
  )
  t.notOk(await windowsProcessAlive(grandchild), 'the grandchild is gone')
})

t.test('a taskkill that fails: the deadline still answers, the agent ended directly, ' +
  'the run saying what may be left', async (t) => {
  // Wine's own taskkill (no stand-in first on PATH) refuses /T: the tree cannot be ended the Windows way.
  const server = await startWindowsServer(t, {
    WINEPATH: [wine.shims, join(wine.nodeExe, '..')].map(windowsPath).join(';')
  })
  const pidFile = join(tempDir(t), 'grandchild.pid')
  const { status, body } = await postJson(server.base, '/tools/crush_run', {
    task: `@grandchild ${windowsPath(pidFile)}`, timeout: 1
  })
  t.equal(status, 200)
  t.match(body, { ok: false, timed_out: true, stop_reason: 'timeout', processes_may_remain: true })
  // Before, nothing answered: a 3 s deadline was still unanswered after 300 s.
  t.ok(body.duration_ms < 30_000, `answered, not left waiting on taskkill: ${String(body.duration_ms)} ms`)
  const grandchild = Number(readFileSync(pidFile, 'utf8'))
  t.teardown(() => run('wine', ['taskkill', '/PID', String(grandchild), '/F'], { env: wine.env }).catch(() => {}))
})

t.test('Ctrl-C: the runs in flight are answered, then the service exits 0', async (t) => {
  const server = await startWindowsServer(t, {})
  const pending = postJson(server.base, '/tools/crush_run', { task: '@sleep 60000' })
  await waitFor(() => server.log().some((entry) => entry['msg'] === 'agent run started'), 30_000, 'the agent to start')
  const exited = once(server.child, 'exit')
  // Wine turns the SIGINT it receives into a console Ctrl-C event for node.exe, which Node reports as SIGINT.
  server.child.kill('SIGINT')
  const answer = await pending
  t.match(answer, { status: 200, body: { stop_reason: 'shutdown', ok: false } })
  const [code] = await exited
  t.equal(code, 0, 'exit code 0')
  t.ok(server.log().some((entry) => entry['signal'] === 'SIGINT' && String(entry['msg']).startsWith('closing')))
})

t.test('DATA_DIR is held by a named pipe: a second service is refused, ' +
  'and one killed outright leaves nothing holding it', async (t) => {
  const data = windowsPath(join(tempDir(t), 'data'))
  const first = await startWindowsServer(t, { DATA_DIR: data })
  await t.rejects(
    startWindowsServer(t, { DATA_DIR: data }), /DATA_DIR .* is in use by another agent-runner: one service per DATA_DIR/
  )
  const exited = once(first.child, 'exit')
  first.child.kill('SIGKILL')
  await exited
  // Before, the lock file named the dead service's pid with no start time, which Wine gave the next service itself.
  const again = await startWindowsServer(t, { DATA_DIR: data })
  t.match(again.base, /^http:\/\/127\.0\.0\.1:\d+$/, 'the next start takes DATA_DIR')
})

t.test('a fleet: a WSL run is offered only to the Windows worker, never to a Linux one', { skip: NO_REDIS },
  async (t) => {
    const { url } = await startRedis(t)
    const env = redisEnv(url, { MAX_CRUSH_AGENTS: '2' })
    const [api] = await Promise.all([
      startServer(t, { ...env, ...NO_AGENT_HERE, ROLE: 'api' }),
      startServer(t, { ...env, ROLE: 'worker' })
    ])
    // Its wsl.exe is the argv stand-in, a native program: what it prints is the command line as Windows split it.
    await startWindowsServer(t, { ...env, ROLE: 'worker', RUNS_STORE: 'redis', WSL_BIN: 'argv.exe' })
    const roll = await fetch(`${api.base}/readyz`).then(async (response) => await response.json() as any)
    const workers = roll.fleet?.members.filter((member: any) => member.role === 'worker')
    t.same(workers.map((member: any) => member.places).sort(), [['host'], ['host', 'wsl']],
      'the Windows worker takes WSL runs, the Linux one does not')

    // One after another, each time with both workers idle: none is offered to the Linux worker.
    for (const attempt of [1, 2, 3]) {
      const inWsl = await postJson(api.base, '/tools/crush_run', { task: TASK, wsl_distro: 'Ubuntu' })
      t.equal(inWsl.status, 200, `run ${attempt} by the Windows worker (a Linux one refuses it: WSL_NOT_AVAILABLE)`)
      const received = JSON.parse(inWsl.body.output).argv
      t.same(received, inWsl.body.command.slice(1), 'wsl.exe got, word for word, the command line the result shows')
      t.same(received.slice(-4), ['crush', 'run', '--', TASK], 'the task last, byte for byte, after --exec')
    }
    const native = await postJson(api.base, '/tools/crush_run', { task: 'on a host', queue_timeout: 60 })
    t.match(native, { status: 200, body: { ok: true } }, 'a host run is run by one or the other')
  })

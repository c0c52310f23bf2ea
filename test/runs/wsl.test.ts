import t from 'tap'
import fc from 'fast-check'
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'
import { placeRun, wslCwdProblem } from '#src/runs/placement.js'
import { RunLedger } from '#src/process/ledger.js'
import { processGroup } from '#src/process/process-group.js'
import { signalWslRun, wslCommand } from '#src/process/wsl-group.js'
import { processStartTime } from '#src/process/posix-signals.js'
import { serviceLife } from '#src/process/run-marks.js'
import { windowsCommandLine } from '#src/process/windows-command-line.js'
import { commandLineToArgv, parseWslCommandLine } from '#fixtures/agents/wsl-command-line.mjs'
import {
  build, cancelRun, createRun, echoed, FIXTURE_BIN, isAlive, listen, post, processesLeft, processesMatching, refused,
  runTool, scenario, standInEnv, tempDir, until, waitFor
} from '../helpers/index.js'

const WINDOWS = { AGENT_HOST_PLATFORM: 'win32' }

/** The launches the stand-in wsl recorded: the argv it got and the command line Windows would have handed it. */
function wslLaunches(log: string): Array<{ wsl_argv: string[]; command_line: string }> {
  if (!existsSync(log)) return []
  return readFileSync(log, 'utf8').split('\n').filter(
    (line) => line.startsWith('{"wsl_argv"')
  ).map((line) => JSON.parse(line))
}
const agentStarts = (log: string): string[][] =>
  existsSync(log)
    ? readFileSync(log, 'utf8').split('\n').filter((line) => line.startsWith('{"pid"'))
      .map((line) => JSON.parse(line).argv)
    : []

/** What placeRun needs besides the host and the request. */
const PLACEMENT = {
  agentBin: 'crush',
  agent: { args: ['run', '--', 'task'], input: undefined },
  wslBin: 'wsl.exe',
  hostContainment: processGroup(),
  runId: 'r1',
  env: { PATH: '/bin', ANTHROPIC_API_KEY: 'k' },
  defaultCwd: '/agents'
}

t.test('placeRun: the WSL shape, once per run', async (t) => {
  const base = PLACEMENT
  const wsl = placeRun({
    ...base, hostPlatform: 'win32', params: { wsl_distro: 'Ubuntu', wsl_user: 'dev', cwd: '/src' }
  })
  t.equal(wsl.where, 'wsl')
  t.same(wsl.command.file, 'wsl.exe')
  t.same(wsl.command.args.slice(0, 7), ['-d', 'Ubuntu', '-u', 'dev', '--cd', '/src', '--exec'])
  t.same(
    wsl.command.args.slice(-5), ['r1', 'crush', 'run', '--', 'task'],
    'the agent argv comes last, as positional parameters'
  )
  t.equal(wsl.command.cwd, undefined)
  t.equal(wsl.containment.mode, 'wsl-process-group')
  t.same(wsl.sudo, { kind: 'wsl', wslBin: 'wsl.exe', distro: 'Ubuntu', user: 'dev' })
  t.equal(wsl.env['WSL_UTF8'], '1', "wsl.exe's own messages in UTF-8")
  t.equal(wsl.env['WSLENV'], 'ANTHROPIC_API_KEY', 'provider keys cross into the distro, WSL_UTF8 does not')
  t.ok(
    wsl.command.args.indexOf('--exec') < wsl.command.args.indexOf('--'),
    'the agent after --exec, never after `--` (the distro shell)'
  )

  const native = placeRun({ ...base, hostPlatform: 'win32', params: { cwd: 'C:\\src' } })
  t.same(
    native.command, { file: 'crush', args: ['run', '--', 'task'], cwd: 'C:\\src' },
    'a Windows host without wsl_distro runs the agent directly'
  )
  t.throws(
    () => placeRun({ ...base, hostPlatform: 'linux', params: { wsl_distro: 'Ubuntu', wsl_user: 'dev', cwd: '/src' } }),
    { code: 'WSL_NOT_AVAILABLE' }, 'another host refuses a distro rather than run on itself'
  )
  const linux = placeRun({ ...base, hostPlatform: 'linux', params: { cwd: '/src' } })
  t.same(linux.command, { file: 'crush', args: ['run', '--', 'task'], cwd: '/src' })
  t.equal(linux.containment, PLACEMENT.hostContainment, 'the host containment')
  t.equal(
    placeRun({ ...base, hostPlatform: 'linux', params: {} }).command.cwd, '/agents',
    'no cwd: AGENT_WORKDIR, never the service’s own directory'
  )
  t.same(
    placeRun({ ...base, hostPlatform: 'win32', params: { wsl_distro: 'Ubuntu' } }).command.args.slice(0, 4),
    ['-d', 'Ubuntu', '--cd', '~'], 'no cwd in WSL: the distro user’s home, not the Windows directory of the service'
  )
})

t.test('a task full of quotes, ' +
  'backslashes and shell syntax reaches the agent byte for byte through wsl.exe', async (t) => {
  const dir = tempDir(t)
  const log = join(dir, 'log')
  const marker = join(dir, 'pwned')
  const task = `$(touch ${marker}) \`touch ${marker}\`; touch ${marker} ` +
    `"quoted \\"inner\\" \\\\" C:\\path\\ 'single' %PATH% ^& | ! trailing\\`
  const app = await build(t, WINDOWS, standInEnv({ STAND_IN_LOG: log }))
  const body = await runTool(app, 'crush_run', { task, wsl_distro: 'Ubuntu-22.04', wsl_user: 'dev', cwd: dir })
  t.equal(echoed(body).prompt, task, 'the prompt crush received is the task')
  t.equal(echoed(body).cwd, dir, '--cd set the directory inside the distro')
  t.notOk(existsSync(marker), 'nothing in the task was executed')
  const launch = wslLaunches(log).find((entry) => entry.wsl_argv.includes('setsid'))
  t.same(['wsl', ...launch!.wsl_argv], body.command, 'the command shown is what wsl.exe was given')
  t.ok(launch!.command_line.includes('\\"quoted'), 'the stand-in parsed a real Windows command line')

  // claude reads its task on stdin, which wsl.exe relays: the same task, on no command line.
  const claude = await runTool(app, 'claude_run', { task, wsl_distro: 'Debian' })
  t.match(claude, { ok: true, agent_report: { is_error: false } }, "claude's report is parsed through wsl")
  t.equal(JSON.parse(claude.output).prompt, task, 'the prompt claude received is the task')
  const claudeLaunch = wslLaunches(log).find(
    (entry) => entry.wsl_argv.includes('setsid') && entry.wsl_argv.includes('claude')
  )
  t.notOk(claudeLaunch!.command_line.includes('trailing'), 'and no command line carried it')
  t.notOk(existsSync(marker), 'nothing in it was executed')
})

t.test('the stand-in wsl would expose a command built with `--`, ' +
  'and a killed wsl leaves its Linux process running', async (t) => {
  // Guards the guards: what the service avoids does go wrong with this stand-in, as it would on Windows.
  const dir = tempDir(t)
  const marker = join(dir, 'pwned')
  execFileSync(join(FIXTURE_BIN, 'wsl'), ['-d', 'Ubuntu', '--', 'echo', `$(touch ${marker})`], { stdio: 'ignore' })
  t.ok(existsSync(marker), 'after `--` the distro shell ran $(…)')

  const token = randomUUID()
  const wsl = spawn(
    join(FIXTURE_BIN, 'wsl'), ['-d', 'Ubuntu', '--exec', 'sh', '-c', 'sleep 60; exit 0', token], { stdio: 'ignore' }
  )
  // Not the stand-in: neither its node process (wsl.mjs) nor, before that execs it, its sh wrapper (bin/wsl).
  const linuxProcess = () => processesMatching(token).filter((line) => !line.includes('wsl'))
  await waitFor(() => linuxProcess().length === 1, 5000, 'the Linux process')
  wsl.kill('SIGKILL')
  await new Promise((resolve) => wsl.once('exit', resolve))
  t.equal(linuxProcess().length, 1, 'ending wsl.exe did not end the Linux process')
  execFileSync('pkill', ['-f', token])
})

const BATCH = 8
const pathChars = fc.constantFrom('a', ' ', '"', '\\', '\t', "'", '$', '-', '=', '%', '^', '&', '!', '~')
const names = fc.array(pathChars, { minLength: 1, maxLength: 8 }).map((chars) => chars.join(''))
const tasks = fc.string({
  unit: fc.constantFrom('a', ' ', '"', '\\', '\t', "'", '$', '(', ')', '`', '\n', '%', '^', '-'),
  minLength: 1,
  maxLength: 20
})
  // A task of blanks only is refused before anything runs (validation.test.ts).
  .filter((task) => /\S/.test(task))

t.test("wsl.exe's own parser cannot be steered: cwd reaches the distro as given, " +
  'or the request is refused', async (t) => {
  t.match(wslCwdProblem('/x" --unregister Ubuntu "'), /cannot contain `"`/)
  t.match(wslCwdProblem('/a"b'), /cannot contain `"`/)
  t.match(wslCwdProblem('/with space\\'), /cannot end with `\\`/)
  t.equal(wslCwdProblem('/with space/and\\backslash'), null)
  t.equal(wslCwdProblem('/plain\\'), null, 'no blank: Node does not quote it, so wsl.exe reads it as it is')

  const root = tempDir(t)
  const log = join(root, 'log')
  const app = await build(t, { ...WINDOWS, MAX_CRUSH_AGENTS: String(BATCH) }, standInEnv({ STAND_IN_LOG: log }))
  const unsafe = await refused(app, 'crush_run', { task: 'x', wsl_distro: 'Ubuntu', cwd: '/x" --unregister Ubuntu "' })
  t.match(unsafe, { status: 400, body: { code: 'WSL_ARGUMENT_UNSAFE', message: /body\/cwd/ } })
  t.same(wslLaunches(log), [], 'wsl.exe was never started for it')

  // Any directory name and any task: either refused, or read back exactly by wsl.exe's rules (the stand-in's parser,
  // test/fixtures/agents/wsl-command-line.mjs) from the command line the service builds. No process needed: many cases.
  fc.assert(
    fc.property(names, tasks, (name, task) => {
      const cwd = join('/srv', name)
      if (wslCwdProblem(cwd) !== null) return true
      const { command } = placeRun({
        ...PLACEMENT,
        agent: { args: ['run', '--', task], input: undefined },
        hostPlatform: 'win32',
        params: { wsl_distro: 'Ubuntu', cwd }
      })
      const { options, line } = parseWslCommandLine(windowsCommandLine('wsl', command.args), ['Ubuntu'])
      const argv = commandLineToArgv(line)
      return options.cwd === cwd && options.exec && JSON.stringify(argv) === JSON.stringify(
        command.args.slice(command.args.indexOf('--exec') + 1)
      ) && argv.at(-1) === task
    }),
    { numRuns: 1000 }
  )

  // And end to end, through the stand-in wsl, the agent and its echo: a few random cases, side by side.
  let index = 0
  const arrives = async ([name, task]: [string, string]): Promise<boolean> => {
    const cwd = join(root, String(index++), name)
    mkdirSync(cwd, { recursive: true })
    const { status, body } = await post(app, 'crush_run', { task, wsl_distro: 'Ubuntu', cwd })
    if (wslCwdProblem(cwd) !== null) return status === 400 && 'code' in body && body.code === 'WSL_ARGUMENT_UNSAFE'
    return status === 200 && 'output' in body && echoed(body).cwd === cwd && echoed(body).prompt === task &&
      echoed(body).argv.at(-1) === task
  }
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.tuple(names, tasks), { minLength: BATCH, maxLength: BATCH }),
      async (cases) => (await Promise.all(cases.map(arrives))).every(Boolean)
    ),
    { numRuns: 1 }
  )
})

t.test('a distro that does not exist is a 400 naming it, before anything runs', async (t) => {
  const log = join(tempDir(t), 'log')
  const app = await build(t, WINDOWS, standInEnv({ STAND_IN_LOG: log }))
  const { status, body } = await refused(app, 'crush_run', { task: 'x', wsl_distro: 'Arch' })
  t.equal(status, 400)
  t.same(body, {
    statusCode: 400,
    error: 'Bad Request',
    code: 'WSL_DISTRO_NOT_FOUND',
    message: 'body/wsl_distro: there is no WSL distro named Arch on this host (wsl --list)'
  })
  t.same(agentStarts(log), [], 'no agent started')
  t.equal(app.slots.inUse('crush_run'), 0)
  t.equal(
    (await post(app, 'crush_run', { task: 'x', wsl_distro: 'ubuntu' })).status, 200,
    'names compare case-insensitively, as wsl.exe does'
  )
})

t.test("a user that does not exist: wsl.exe's own message, readable (UTF-8), as the run's output", async (t) => {
  const app = await build(t, WINDOWS, standInEnv({ WSL_STAND_IN_USERS: 'root,dev' }))
  const body = await runTool(app, 'crush_run', { task: 'x', wsl_distro: 'Ubuntu', wsl_user: 'nobody-here' })
  t.match(body, { ok: false, exit_code: 255, output: /User not found\.\r\nError code: Wsl\/WSL_E_USER_NOT_FOUND/ })
})

t.test('a command line longer than Windows carries is a 400, not a failed spawn', async (t) => {
  const app = await build(t, WINDOWS)
  // 20,000 characters, each a quote that Node escapes as \": 40,000 on the command line.
  const { status, body } = await refused(app, 'crush_run', { task: '"'.repeat(20_000), wsl_distro: 'Ubuntu' })
  t.equal(status, 400)
  t.match(body, {
    code: 'COMMAND_LINE_TOO_LONG', message: /body\/task: the command line would be 4\d{4} characters, over the 32766/
  })
  const native = await post(app, 'crush_run', { task: '\\"'.repeat(11_000) })
  t.match(native, { status: 400, body: { code: 'COMMAND_LINE_TOO_LONG' } }, 'without WSL too')
  t.equal(
    (await post(app, 'crush_run', { task: 'x'.repeat(30_000), wsl_distro: 'Ubuntu' })).status, 200,
    'the longest plain task fits'
  )
})

/**
 * Every end of a WSL run stops the agent inside the distro, not just wsl.exe. The ends side by side, on one
 * service.
 */
t.test('every end of a WSL run stops the Linux process tree inside the distro', { jobs: 5 }, async (t) => {
  const app = await build(t, { ...WINDOWS, MAX_CRUSH_AGENTS: '4', AGENT_KILL_GRACE_MS: '300' })
  const base = await listen(t, app)
  // wsl.exe, the setsid it runs and the agent all carry the task in their argv: alive counts any of them left behind,
  // agentRunning waits for the agent itself (counting "exactly one" of all three raced the moments they start in).
  const alive = async (token: string) => (await processesLeft(token)).length
  const agentRunning = (token: string) => processesMatching(token).some((line) => line.includes('/agents/crush.mjs '))

  const ends = [
    t.test('deadline', async (t) => {
      const token = randomUUID()
      const result = await runTool(app, 'crush_run', {
        task: scenario.grandchild(join(tempDir(t), 'pid'), { markers: [token] }), wsl_distro: 'Ubuntu', timeout: 3
      })
      t.match(result, { timed_out: true, stop_reason: 'timeout' })
      t.equal(await alive(token), 0, 'neither the agent nor its grandchild is left in the distro')
    }),

    t.test('an agent ignoring SIGINT and SIGTERM: SIGKILL inside the distro', async (t) => {
      const token = randomUUID()
      const result = await runTool(app, 'crush_run', {
        task: scenario.grandchild(join(tempDir(t), 'pid'), { stubborn: true, markers: [token] }),
        wsl_distro: 'Ubuntu',
        timeout: 3
      })
      t.match(result, { timed_out: true })
      t.ok(result.duration_ms >= 3000 + 2 * 300, 'after SIGINT and SIGTERM had their grace')
      t.equal(await alive(token), 0)
    }),

    t.test('DELETE of an async run', async (t) => {
      const token = randomUUID()
      const created = await createRun(app, {
        tool: 'crush_run', task: scenario.sleep(60000, token), wsl_distro: 'Ubuntu'
      })
      await waitFor(() => agentRunning(token), 15_000, 'the agent inside the distro')
      t.match(await cancelRun(app, created.id), { status: 'cancelled', result: { stop_reason: 'cancelled' } })
      t.equal(await alive(token), 0)
    }),

    t.test('the client going away', async (t) => {
      const token = randomUUID()
      const client = request(`${base}/tools/crush_run`, {
        method: 'POST', headers: { 'content-type': 'application/json' }
      })
      client.on('error', () => {})
      client.end(JSON.stringify({ task: scenario.sleep(60000, token), wsl_distro: 'Ubuntu' }))
      await waitFor(() => agentRunning(token), 15_000, 'the agent inside the distro')
      client.destroy()
      t.equal(
        await until(
          () => processesMatching(token).length, (count) => count === 0, 15_000, 'the agent inside the distro to stop'
        ),
        0
      )
    }),

    t.test('shutdown', async (t) => {
      const token = randomUUID()
      const closing = await build(t, WINDOWS)
      const pending = runTool(closing, 'crush_run', { task: scenario.sleep(60000, token), wsl_distro: 'Ubuntu' })
      await waitFor(() => agentRunning(token), 15_000, 'the agent inside the distro')
      await closing.close()
      t.match(await pending, { stop_reason: 'shutdown' })
      t.equal(await alive(token), 0)
    })
  ]
  await Promise.all(ends)
  t.equal(
    await until(() => app.slots.inUse('crush_run'), (inUse) => inUse === 0, 10_000, 'the slots to come back'), 0,
    'every slot came back'
  )
})

t.test('a WSL run left by a killed service is stopped inside the distro at the next start', async (t) => {
  const dataDir = tempDir(t)
  const token = randomUUID()
  const runId = randomUUID()
  const target = { wslBin: join(FIXTURE_BIN, 'wsl'), distro: 'Ubuntu', user: undefined, cwd: undefined }
  const { file, args } = wslCommand(target, runId, 'sh', ['-c', 'sleep 60; exit 0', token])
  // What a service killed mid-run leaves: its record, and the agent running in the distro.
  spawn(file, args, { stdio: 'ignore', env: standInEnv() }).unref()
  new RunLedger(dataDir).started(runId, { kind: 'wsl-group', distro: target.distro, user: undefined, runId })
  // Running inside the distro once its start script has recorded it.
  const pidFile = `/tmp/agent-runner-${runId}.run/pid`
  await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8') !== '', 15_000, 'the leftover agent')
  // The program that stops it is this start's WSL_BIN, never one a record names.
  const context = { env: standInEnv(), life: serviceLife(dataDir, 'now'), wslBin: target.wslBin }
  const leftovers = await new RunLedger(dataDir).stopLeftovers(context)
  t.match(leftovers, [{ runId, record: { kind: 'wsl-group', distro: 'Ubuntu' }, stopped: true }])
  t.same(
    await until(() => processesMatching(token), (left) => left.length === 0, 15_000, 'the leftover to stop'), [],
    'it was stopped inside the distro'
  )
  t.notOk(existsSync(pidFile), 'its record inside the distro is gone')
  t.same(await new RunLedger(dataDir).stopLeftovers(context), [], 'and it is forgotten')
})

t.test('a WSL run\'s record inside the distro steers nothing it did not write: another user\'s, ' +
  'a stranger under the pid', async (t) => {
  const wslBin = join(FIXTURE_BIN, 'wsl')
  const target = { wslBin, distro: 'Ubuntu', user: undefined }
  /** A process group of the test's own, standing for whatever a forged record would aim at. */
  const victim = () => {
    const child = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' })
    t.teardown(() => { child.kill('SIGKILL') })
    return child.pid!
  }
  const plant = (runId: string, content: string, owner?: number) => {
    const dir = `/tmp/agent-runner-${runId}.run`
    mkdirSync(dir, { mode: 0o700 })
    writeFileSync(join(dir, 'pid'), content)
    if (owner !== undefined) execFileSync('chown', ['-R', String(owner), dir])
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  }
  const stop = (runId: string) => signalWslRun(target, runId, 'SIGKILL', standInEnv(), 0)

  const planted = victim()
  const byOther = randomUUID()
  plant(byOther, `${planted} ${processStartTime(planted)!}\n`, 65534)
  await stop(byOther)
  t.ok(isAlive(planted), 'a directory another user made is not acted on')
  const { file, args } = wslCommand({ ...target, cwd: undefined }, byOther, 'sh', ['-c', 'echo started'])
  const run = spawnSync(file, args, { env: standInEnv(), encoding: 'utf8' })
  t.equal(run.status, 125, 'and a run whose directory someone made first does not start')
  t.notMatch(run.stdout, /started/)

  const stranger = randomUUID()
  plant(stranger, `${planted} 1\n`)
  await stop(stranger)
  t.ok(isAlive(planted), 'a pid whose process started at another time is a stranger')

  for (const pid of ['1', '0', '-1', '1 2', 'x']) {
    const odd = randomUUID()
    plant(odd, `${pid}\n`)
    await stop(odd)
  }
  t.ok(isAlive(process.pid), 'no pid of 1 or below, nor text, reaches kill')

  const recorded = randomUUID()
  plant(recorded, `${planted} ${processStartTime(planted)!}\n`)
  await stop(recorded)
  t.notOk(
    await until(() => isAlive(planted), (alive) => !alive, 5000, 'the recorded group to end'),
    'the same record, the run user\'s own, is acted on'
  )
})

import t, { type Test } from 'tap'
import {
  chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, symlinkSync, truncateSync, writeFileSync
} from 'node:fs'
import { execFileSync } from 'node:child_process'
import { userInfo } from 'node:os'
import { join } from 'node:path'
import { RunParams } from '#src/schemas/run.js'
import { SudoPasswordDetector } from '#src/sudo/detector.js'
import { readReportFile, readSudoReport, SudoShim, SUDO_REPORT_MAX_BYTES } from '#src/sudo/shim.js'
import { build, FIXTURE_BIN, fromRoot, runTool, scenario, standInEnv, tempDir, until } from '../helpers/index.js'

const SUDO_DIR = {
  passwordless: fromRoot('test/fixtures/sudo-passwordless'),
  password: fromRoot('test/fixtures/sudo-password')
}

/**
 * A PATH holding only the stand-ins, node, and the chosen sudo (or none): the real machine's sudo, if any, never
 * counts.
 */
function agentEnvWithSudo(t: Test, sudo: keyof typeof SUDO_DIR | 'absent', extra: NodeJS.ProcessEnv = {}) {
  const dir = tempDir(t)
  const tools = join(dir, 'tools')
  mkdirSync(tools)
  symlinkSync(process.execPath, join(tools, 'node'))
  symlinkSync('/bin/sh', join(tools, 'sh'))
  symlinkSync('/bin/true', join(tools, 'true'))
  // util-linux's setsid is in every distro (WSL runs start through it), and so are the coreutils the WSL start script
  // sets the sudo shim up with.
  symlinkSync('/usr/bin/setsid', join(tools, 'setsid'))
  for (const tool of ['mkdir', 'chmod', 'cat', 'head', 'rm', 'id']) symlinkSync(`/bin/${tool}`, join(tools, tool))
  const log = join(dir, 'sudo.log')
  const path = [...(sudo === 'absent' ? [] : [SUDO_DIR[sudo]]), FIXTURE_BIN, tools].join(':')
  return { env: standInEnv({ PATH: path, SUDO_STAND_IN_LOG: log, ...extra }), calls: () => sudoCalls(log) }
}

function sudoCalls(log: string): Array<{ mode: string; argv: string[]; distro: string | null; user: string | null }> {
  if (!existsSync(log)) return []
  return readFileSync(log, 'utf8').trim().split('\n').map((line) => JSON.parse(line))
}

const probes = (calls: ReturnType<typeof sudoCalls>) => calls.filter((call) => call.argv.join(' ') === '-n true')

const STATES = [
  ['passwordless', 'passwordless'], ['password', 'password_required'], ['absent', 'not_installed']
] as const

// Each test has its own service, sudo and logs: side by side.
t.jobs = 3

// Each state on a service of its own: they run side by side.
t.test('the probe tells the three states on the host, in every response', async (t) => {
  await Promise.all(STATES.map(async ([sudo, expected]) => {
    const { env } = agentEnvWithSudo(t, sudo)
    const app = await build(t, {}, env)
    for (const tool of ['crush_run', 'claude_run'] as const) {
      const body = await runTool(app, tool, { task: 'hello' })
      t.same(body.sudo, { status: expected, password_needed: false, message: null }, `${tool} with sudo ${sudo}`)
    }
  }))
})

t.test('inside WSL the probe runs through wsl as the distro user', async (t) => {
  await Promise.all(STATES.map(async ([sudo, expected]) => {
    const { env, calls } = agentEnvWithSudo(t, sudo)
    const app = await build(t, { AGENT_HOST_PLATFORM: 'win32' }, env)
    const body = await runTool(app, 'crush_run', { task: 'hello', wsl_distro: 'Ubuntu', wsl_user: 'dev' })
    t.equal(body.sudo.status, expected, `wsl with sudo ${sudo}`)
    if (sudo !== 'absent') {
      t.match(probes(calls()), [{ distro: 'Ubuntu', user: 'dev' }], 'probed inside the distro as wsl_user')
    }
  }))
})

t.test('an agent whose sudo needs a password ends at once, and the response says why and what to do', async (t) => {
  await Promise.all(['C.UTF-8', 'fr_FR.UTF-8'].map(async (lang) => {
    // An askpass helper and a display in the service's environment must not give sudo a way to prompt.
    const { env } = agentEnvWithSudo(t, 'password', { LANG: lang, SUDO_ASKPASS: '/usr/bin/ssh-askpass', DISPLAY: ':0' })
    const app = await build(t, {}, env)
    for (const tool of ['crush_run', 'claude_run'] as const) {
      const body = await runTool(app, tool, { task: scenario.sudo('apt-get', 'install', '-y', 'ripgrep'), timeout: 60 })
      t.match(
        body, { timed_out: false, stop_reason: null, exit_code: 0 }, `${tool} (${lang}): sudo failed instead of waiting`
      )
      t.match(body.output, /sudo exited 1/)
      t.equal(body.sudo.status, 'password_required')
      t.equal(body.sudo.password_needed, true)
      t.match(body.sudo.message, /L’agent a tenté d’utiliser sudo.*mot de passe.*NOPASSWD.*n’ait pas besoin de sudo/)
      t.match(body.sudo.message, /sur l’hôte/)
    }
  }))
})

t.test('inside WSL, the shim the start script sets up reports it whatever the CLI prints, ' +
  'naming the distro and the user', async (t) => {
  const { env } = agentEnvWithSudo(t, 'password')
  const app = await build(t, { AGENT_HOST_PLATFORM: 'win32' }, env)
  // claude in json mode prints nothing of its tools: only the distro's shim can tell.
  for (const tool of ['crush_run', 'claude_run'] as const) {
    const named = await runTool(app, tool, {
      task: scenario.sudo('ls', '/root'), wsl_distro: 'Debian', wsl_user: 'alice'
    })
    t.match(
      named.sudo, { password_needed: true, message: /l’utilisateur « alice » dans la distribution WSL « Debian »/ },
      `${tool}: wsl_user`
    )
    // The stand-in distro's default user is whoever runs it here: the shim's askpass names it.
    const byDefault = await runTool(app, tool, { task: scenario.sudo('ls', '/root'), wsl_distro: 'Debian' })
    t.match(
      byDefault.sudo,
      {
        password_needed: true, message: new RegExp(`l’utilisateur « ${userInfo().username} » dans la distribution WSL`)
      },
      `${tool}: the default user, by name`
    )
  }
})

t.test('passwordless sudo runs as usual and no message appears', async (t) => {
  const { env, calls } = agentEnvWithSudo(t, 'passwordless')
  const app = await build(t, {}, env)
  const body = await runTool(app, 'crush_run', { task: scenario.sudo('node', '-e', 'process.exit(0)') })
  t.match(body.output, /sudo exited 0/)
  t.same(body.sudo, { status: 'passwordless', password_needed: false, message: null })
  t.ok(
    calls().some((call) => call.argv.join(' ') === '-A node -e process.exit(0)'),
    'the agent’s sudo call went through the shim (-A: never a prompt)'
  )
})

t.test('the probe is cached per context', async (t) => {
  const { env, calls } = agentEnvWithSudo(t, 'passwordless')
  // A TTL far longer than the test, so a slow machine cannot expire an answer between two runs.
  const app = await build(t, { AGENT_HOST_PLATFORM: 'win32', SUDO_PROBE_TTL_MS: '600000', MAX_CRUSH_AGENTS: '3' }, env)
  await Promise.all([1, 2, 3].map(() => runTool(app, 'crush_run', { task: 'x' })))
  await runTool(app, 'crush_run', { task: 'x' })
  t.equal(probes(calls()).length, 1, 'one probe for four host runs, three of them concurrent')
  await runTool(app, 'crush_run', { task: 'x', wsl_distro: 'Ubuntu', wsl_user: 'a' })
  await runTool(app, 'crush_run', { task: 'x', wsl_distro: 'Ubuntu', wsl_user: 'b' })
  await runTool(app, 'crush_run', { task: 'x', wsl_distro: 'Ubuntu', wsl_user: 'a' })
  t.equal(probes(calls()).length, 3, 'one more per distro user')
})

t.test('a cached answer expires after SUDO_PROBE_TTL_MS', async (t) => {
  const { env, calls } = agentEnvWithSudo(t, 'passwordless')
  const app = await build(t, { SUDO_PROBE_TTL_MS: '200' }, env)
  await runTool(app, 'crush_run', { task: 'x' })
  t.equal(probes(calls()).length, 1)
  // Runs, as callers keep sending them, until one finds the answer expired and probes again.
  const probedAgain = async () => {
    await runTool(app, 'crush_run', { task: 'x' })
    return probes(calls()).length
  }
  await until(probedAgain, (count) => count > 1, 5000, 'a second probe')
  t.equal(probes(calls()).length, 2, 'probed again once the answer expired')
})

t.test('the detector: sudo’s messages in both languages, across chunk boundaries, and nothing else', async (t) => {
  const detects = (...chunks: string[]) => {
    const detector = new SudoPasswordDetector()
    for (const chunk of chunks) detector.push(Buffer.from(chunk))
    return detector.detected
  }
  t.ok(detects('sudo: a password is required\n'))
  t.ok(detects('noise\nsudo: a term', 'inal is required to read the password; either use…\n'))
  t.ok(detects('sudo: no tty present and no askpass program specified\n'))
  t.ok(detects('sudo: il est nécessaire de saisir un mot de passe\n'))
  t.ok(detects("sudo: un terminal est requis pour lire le mot de passe; utilisez soit l'option -S\n"))
  t.ok(
    detects('[sudo] password for dev: Sorry, try again.\nsudo: 1 incorrect password attempt\n'),
    'sudo -S given a wrong password'
  )
  t.ok(detects('sudo: 3 incorrect password attempts\n'))
  t.ok(detects('sudo: no password was provided\n'), 'sudo -S given none')
  t.ok(detects('sudo: 1 saisie de mot de passe incorrecte\n'))
  t.ok(detects('sudo: 2 saisies de mots de passe incorrectes\n'))
  t.ok(detects('sudo: aucun mot de passe fourni\n'))
  t.notOk(detects('To log in, a password is required.\n'), 'not without sudo speaking')
  t.notOk(detects('sudo: 3 incorrect password attempts\n'.replace('3 incorrect', 'ls: not a sudo prompt')))
  t.notOk(detects('sudo: ls\n', 'a password is required\n'), 'the message is one line')
})

t.test('the detector sees a message wherever the chunks split it, after any amount of output', async (t) => {
  const message = 'sudo: un mot de passe est nécessaire\n'
  for (const noise of [0, 100, 300, 70_000]) {
    const stream = Buffer.concat([Buffer.alloc(noise, 'x'), Buffer.from(message), Buffer.from('after\n')])
    const missed: number[] = []
    for (let cut = 0; cut <= stream.length; cut += cut < noise - 300 ? 4096 : 1) {
      const detector = new SudoPasswordDetector()
      detector.push(stream.subarray(0, cut))
      detector.push(stream.subarray(cut))
      if (!detector.detected) missed.push(cut)
    }
    t.same(missed, [], `after ${noise} bytes, split anywhere`)
    const byteByByte = new SudoPasswordDetector()
    for (let at = Math.max(0, noise - 10); at < stream.length; at++) byteByByte.push(stream.subarray(at, at + 1))
    t.ok(byteByByte.detected, `after ${noise} bytes, one byte at a time`)
  }
})

t.test('a report is the agent’s own writing: ' +
  'only a user name sudo could have asked about is taken from it', async (t) => {
  t.same(readSudoReport(''), { passwordNeeded: false })
  t.same(readSudoReport('password_required dev\n'), { passwordNeeded: true, user: 'dev' })
  t.same(
    readSudoReport('password_required « root » sur l’hôte; rm -rf /\n'), { passwordNeeded: true },
    'a forged name is not repeated'
  )
})

t.test('agents of the service’s own user: ' +
  'what one planted in the shim is gone before the next agent starts', async (t) => {
  const { env } = agentEnvWithSudo(t, 'password')
  const app = await build(t, {}, env)
  const seen = JSON.parse(
    (await runTool(app, 'crush_run', { task: scenario.env() })).output.split('\n')[0]!
  ) as Record<string, string>
  const shimBin = seen['PATH']!.split(':')[0]!
  t.match(shimBin, /agent-runner-sudo-[^/]+\/bin$/)
  const planted = join(shimBin, 'claude')
  await runTool(app, 'crush_run', { task: scenario.shell('sh', '-c', `echo\${IFS}planted>${planted}`) })
  t.ok(existsSync(planted), 'an agent of the service’s user could plant it')
  await runTool(app, 'crush_run', { task: scenario.sleep(1) })
  t.notOk(existsSync(planted), 'the next run found the shim as installed')
})

t.test('an agent that puts a FIFO in place of its report: its run still ends, and the service answers', async (t) => {
  const { env } = agentEnvWithSudo(t, 'password')
  const app = await build(t, {}, { ...env, PATH: `${env['PATH']!}:/usr/bin:/bin` })
  /* eslint-disable no-template-curly-in-string */
  const swap = 'test${IFS}-n${IFS}"$AGENT_RUNNER_SUDO_REPORT"&&rm${IFS}"$AGENT_RUNNER_SUDO_REPORT"&&' +
    'mkfifo${IFS}"$AGENT_RUNNER_SUDO_REPORT"&&echo${IFS}swapped'
  /* eslint-enable no-template-curly-in-string */
  const body = await runTool(app, 'crush_run', { task: scenario.shell('sh', '-c', swap), timeout: 60 })
  t.match(body.output, /swapped/, 'the report was a FIFO when the run ended')
  t.match(body, { ok: true, sudo: { password_needed: false } })
  t.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200)
})

t.test('a report is read as a plain file, at most 4 KiB: a FIFO, ' +
  'a link or a huge file in its place holds nothing', async (t) => {
  const dir = tempDir(t)
  const report = join(dir, 'report')
  writeFileSync(report, 'password_required dev\n')
  t.equal(await readReportFile(report), 'password_required dev\n')
  const huge = join(dir, 'huge')
  closeSync(openSync(huge, 'w'))
  truncateSync(huge, 400 * 1024 * 1024)
  t.equal((await readReportFile(huge)).length, SUDO_REPORT_MAX_BYTES, '400 MB: its first 4 KiB')
  const fifo = join(dir, 'fifo')
  execFileSync('mkfifo', [fifo])
  t.equal(await readReportFile(fifo), '', 'a FIFO nobody writes: not waited on')
  const zero = join(dir, 'zero')
  symlinkSync('/dev/zero', zero)
  t.equal(await readReportFile(zero), '', 'a link is not followed')
  t.equal(await readReportFile(join(dir, 'missing')), '')
})

t.test('the shim is put back before each run: a planted program, a changed script, ' +
  'a directory made a link', async (t) => {
  const shim = SudoShim.install(tempDir(t))
  t.same(await shim.restore(), [], 'as installed: nothing to do')
  const planted = join(shim.dir, 'bin', 'claude')
  writeFileSync(planted, '#!/bin/sh\necho pwned\n', { mode: 0o755 })
  writeFileSync(join(shim.dir, 'askpass'), '#!/bin/sh\necho hunter2\n')
  chmodSync(join(shim.dir, 'bin'), 0o777)
  t.same((await shim.restore()).sort(), [join(shim.dir, 'askpass'), planted].sort())
  t.notOk(existsSync(planted))
  t.match(readFileSync(join(shim.dir, 'askpass'), 'utf8'), /agent-runner never gives one/)
  t.equal(execFileSync('stat', ['-c', '%a', join(shim.dir, 'bin')], { encoding: 'utf8' }).trim(), '755')
  const reports = join(shim.dir, 'reports')
  execFileSync('rm', ['-r', reports])
  symlinkSync(dir(t), reports)
  t.same(await shim.restore(), [reports])
  t.equal(execFileSync('stat', ['-c', '%F %a', reports], { encoding: 'utf8' }).trim(), 'directory 711')
})

const dir = (t: Test): string => tempDir(t)

t.test('a shim known whole is not read again, yet each change alone, made after, is seen and put back', async (t) => {
  const shim = SudoShim.install(tempDir(t))
  const bin = join(shim.dir, 'bin')
  const askpass = join(shim.dir, 'askpass')
  const reports = join(shim.dir, 'reports')
  const changes: Array<[string, () => void, string[]]> = [
    ['a program planted', () => { writeFileSync(join(bin, 'claude'), 'x') }, [join(bin, 'claude')]],
    ['a script written in place', () => { writeFileSync(askpass, '#!/bin/sh\necho hunter2\n') }, [askpass]],
    ['the same script, the same size, other bytes',
      () => { writeFileSync(askpass, readFileSync(askpass, 'utf8').replace('never', 'NEVER')) }, [askpass]],
    ['a directory opened to all', () => { chmodSync(bin, 0o777) }, []],
    ['the reports made a link', () => {
      execFileSync('rm', ['-r', reports])
      symlinkSync(dir(t), reports)
    }, [reports]]
  ]
  for (const [what, change, expected] of changes) {
    t.same(await shim.restore(), [], `${what}: whole before`)
    change()
    t.same(await shim.restore(), expected, `${what}: seen`)
    t.equal(execFileSync('stat', ['-c', '%a', bin], { encoding: 'utf8' }).trim(), '755', `${what}: put back`)
  }
  const report = await shim.watch({ PATH: '/bin' }, '/usr/bin/sudo')
  t.same(await shim.restore(), [], 'a run’s report file is not a change of the shim')
  await report.end()
})

t.test('no field can carry a password', async (t) => {
  t.same(Object.keys(RunParams.properties).filter((name) => /pass|secret|token|cred/i.test(name)), [])
})

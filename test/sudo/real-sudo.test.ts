import t from 'tap'
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { build, listen, runTool, scenario, standInEnv } from '../helpers/index.js'
import { runThrough, SURFACES } from '../helpers/surfaces.js'
import { asRoot, directoryOf, realSudoInstalled, realUser, type RealUser } from '../helpers/users.js'

// Debian's real sudo and real accounts: AGENT_USER with a sudoers rule that needs a password, and one that does not.
// The stand-in agents call sudo the way the CLIs' shell tools do (through PATH); the real CLIs meet the same sudo in
// test/e2e/.

const skip = !asRoot ? 'needs root (useradd, sudoers)' : !realSudoInstalled && 'needs the sudo package'
const namespaceMode = ['/usr/bin/unshare', '/usr/bin/tini'].every((tool) => existsSync(tool))

// Each test has its own services: side by side.
t.jobs = 2

t.test('sudo that needs a password: reported in every output mode, naming AGENT_USER, ' +
  'whatever the CLI prints', { skip }, async (t) => {
  const user = realUser('ar-sudo-pw', 'password')
  const base = await listen(
    t, await build(t, { AGENT_USER: user.name, AGENT_WORKDIR: directoryOf(t, user) }, standInEnv())
  )
  // crush prints its tools' output, claude its tool results inside stream-json lines, and its `output` is only its
  // answer: the password prompt must be seen whatever reached the output.
  for (const [tool, surfaces] of [['crush_run', ['json']], ['claude_run', SURFACES]] as const) {
    for (const surface of surfaces) {
      const { result } = await runThrough(surface, base, tool, { task: scenario.sudo('true'), timeout: 60 })
      const what = `${tool} (${surface})`
      t.match(
        result, { timed_out: false, sudo: { status: 'password_required', password_needed: true } },
        `${what}: sudo failed at once and it was seen`
      )
      t.match(result.output, /sudo exited 1/)
      t.match(
        result.sudo.message, new RegExp(`l’utilisateur « ${user.name} » sur l’hôte`),
        `${what}: names the user the agent ran as`
      )
      if (tool === 'claude_run') t.notMatch(result.output, /sudo:|agent-runner:/, 'nothing of sudo in claude\'s answer')
      if (tool === 'crush_run') {
        t.match(
          result.output, new RegExp(`agent-runner: sudo needs a password for user ${user.name} here`),
          'the agent itself read why'
        )
      }
    }
  }
})

t.test('sudo -S given a wrong password, or none, on standard input: it needed one, ' +
  'and that is reported', { skip }, async (t) => {
  const user = realUser('ar-sudo-pw', 'password')
  const app = await build(t, { AGENT_USER: user.name, AGENT_WORKDIR: directoryOf(t, user) }, standInEnv())
  // No spaces (a stand-in's task is its words): the shell's $IFS stands for them.
  // eslint-disable-next-line no-template-curly-in-string
  for (const input of ['echo${IFS}wrong|', ':|', '']) {
    const body = await runTool(app, 'crush_run', {
      task: scenario.shell('sh', '-c', `${input}sudo\${IFS}-S\${IFS}-k\${IFS}true`), timeout: 60
    })
    t.match(body.output, /incorrect password attempt|no password was provided/, `${input || 'no input'}: sudo refused`)
    t.match(
      body, { timed_out: false, sudo: { status: 'password_required', password_needed: true } }, input || 'no input'
    )
  }
})

t.test('passwordless sudo runs the command as asked, and reports nothing', { skip }, async (t) => {
  const user = realUser('ar-sudo-nopw', 'nopasswd')
  const app = await build(t, { AGENT_USER: user.name, AGENT_WORKDIR: directoryOf(t, user) }, standInEnv())
  const body = await runTool(app, 'crush_run', { task: scenario.sudo('id', '-u'), timeout: 60 })
  t.match(body, { sudo: { status: 'passwordless', password_needed: false, message: null } })
  t.match(body.output, /^0$/m, 'the command ran as root')
  t.match(body.output, /sudo exited 0/)
})

t.test('a run’s report file is its own: agents cannot list the others', { skip }, async (t) => {
  const user = realUser('ar-sudo-pw', 'password')
  const app = await build(t, { AGENT_USER: user.name, AGENT_WORKDIR: directoryOf(t, user) }, standInEnv())
  const { output } = await runTool(app, 'crush_run', { task: scenario.env() })
  const seen = JSON.parse(output.split('\n')[0]!) as Record<string, string>
  const report = seen['AGENT_RUNNER_SUDO_REPORT']!
  t.match(
    seen, { AGENT_RUNNER_SUDO: '/usr/bin/sudo', PATH: /agent-runner-sudo-[^/]+\/bin:/ }, 'the shim first on its PATH'
  )
  const asAgent = (...argv: string[]) =>
    spawnSync(
      'setpriv', ['--reuid', String(user.uid), '--regid', String(user.gid), '--init-groups', ...argv],
      { encoding: 'utf8' }
    )
  const listing = asAgent('ls', dirname(report))
  t.not(listing.status, 0, 'the reports directory cannot be listed by the agent')
  t.match(listing.stderr, /Permission denied/)
  t.not(asAgent('test', '-w', dirname(report)).status, 0, 'nor written')
})

t.test('pid-namespace as root: the shim stands at sudo’s own path in the run alone, so an absolute sudo with its ' +
  'messages thrown away is still seen', {
  skip: skip || (!namespaceMode && 'needs util-linux unshare and tini')
}, async (t) => {
  const sudoPath = realpathSync(execFileSync('sh', ['-c', 'command -v sudo'], { encoding: 'utf8' }).trim())
  const before = readFileSync(sudoPath)
  // A script the agent runs (a stand-in's task is words without blanks): sudo by its absolute path, stderr thrown away.
  const silent = (user: RealUser, command: string) => {
    const script = join(directoryOf(t, user), 'silent.sh')
    writeFileSync(script, `${sudoPath} ${command} 2>/dev/null; echo sudo-exit=$?\n`, { mode: 0o644 })
    return scenario.shell('sh', script)
  }
  const password = realUser('ar-sudo-pw', 'password')
  const app = await build(
    t,
    {
      AGENT_USER: password.name,
      AGENT_WORKDIR: directoryOf(t, password),
      AGENT_CONTAINMENT: 'pid-namespace',
      AGENT_LIMITS: 'off'
    },
    standInEnv()
  )
  const refused = await runTool(app, 'crush_run', { task: silent(password, 'true'), timeout: 60 })
  t.match(refused.output, /sudo-exit=1/, 'sudo failed at once')
  t.notMatch(refused.output, /^sudo: /m, 'sudo’s own messages thrown away')
  t.match(
    refused, { timed_out: false, sudo: { status: 'password_required', password_needed: true } },
    'it was reported: the askpass told the service'
  )

  const passwordless = realUser('ar-sudo-nopw', 'nopasswd')
  const root = await runTool(
    await build(
      t,
      {
        AGENT_USER: passwordless.name,
        AGENT_WORKDIR: directoryOf(t, passwordless),
        AGENT_CONTAINMENT: 'pid-namespace',
        AGENT_LIMITS: 'off'
      },
      standInEnv()
    ),
    'crush_run', { task: silent(passwordless, 'id -u'), timeout: 60 }
  )
  t.match(root.output, /^0$/m, 'the real sudo behind it still makes root (its set-user-ID bit kept)')
  t.match(root, { sudo: { status: 'passwordless', password_needed: false } })
  t.ok(readFileSync(sudoPath).equals(before), 'outside the runs, sudo is the real one')
})

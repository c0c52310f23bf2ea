import t from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { buildAgentCommand } from '../src/agents/command.js'
import { build, echoed, FIXTURE_BIN, post, tempDir } from './helper.js'

const wslArgv = (output: string): string[] => {
  const line = output.split('\n').find((candidate) => candidate.startsWith('{"wsl_argv"'))
  if (line === undefined) throw new Error(`the wsl stand-in did not run: ${output}`)
  return JSON.parse(line).wsl_argv
}

t.test('buildAgentCommand: the WSL shape and its optional parts', async (t) => {
  const base = { agentBin: 'crush', agentArgs: ['run', '--', 'task'], wslBin: 'wsl.exe' }
  t.same(buildAgentCommand({ ...base, hostPlatform: 'win32', params: { wsl_distro: 'Ubuntu', wsl_user: 'dev', cwd: '/src' } }), {
    file: 'wsl.exe',
    args: ['-d', 'Ubuntu', '-u', 'dev', '--cd', '/src', '--exec', 'crush', 'run', '--', 'task'],
    cwd: undefined
  })
  t.same(buildAgentCommand({ ...base, hostPlatform: 'win32', params: { wsl_distro: 'Ubuntu' } }).args, [
    '-d', 'Ubuntu', '--exec', 'crush', 'run', '--', 'task'
  ])
  t.same(buildAgentCommand({ ...base, hostPlatform: 'win32', params: { cwd: 'C:\\src' } }), {
    file: 'crush', args: ['run', '--', 'task'], cwd: 'C:\\src'
  }, 'a Windows host without wsl_distro runs the agent directly')
  t.same(buildAgentCommand({ ...base, hostPlatform: 'linux', params: { wsl_distro: 'Ubuntu', wsl_user: 'dev', cwd: '/src' } }), {
    file: 'crush', args: ['run', '--', 'task'], cwd: '/src'
  }, 'other hosts ignore the wsl fields')
})

t.test('on a Windows host the agent runs through wsl --exec, never through the distro shell', async (t) => {
  const dir = tempDir(t)
  const marker = join(dir, 'pwned')
  const task = `$(touch ${marker}) \`touch ${marker}\`; touch ${marker}`
  const app = await build(t, { AGENT_HOST_PLATFORM: 'win32' })

  const { status, body } = await post(app, 'crush_run', { task, wsl_distro: 'Ubuntu-22.04', wsl_user: 'dev', cwd: dir })
  t.equal(status, 200)
  const expected = ['-d', 'Ubuntu-22.04', '-u', 'dev', '--cd', dir, '--exec', 'crush', 'run', '--', task]
  t.same(body.command, ['wsl', ...expected])
  t.same(wslArgv(body.output), expected, 'wsl received exactly that argv')
  t.equal(echoed(body).prompt, task, 'the task reached crush byte for byte')
  t.equal(echoed(body).cwd, dir, '--cd set the directory')
  t.notOk(existsSync(marker), 'nothing in the task was executed')

  const claude = await post(app, 'claude_run', { task: 'inside wsl', wsl_distro: 'Debian' })
  t.same(claude.body.command.slice(0, 5), ['wsl', '-d', 'Debian', '--exec', 'claude'])
  t.match(claude.body, { ok: true, agent_report: { is_error: false } }, "claude's report is parsed through wsl")
  t.equal(JSON.parse(claude.body.output).prompt, 'inside wsl')
})

t.test('the stand-in wsl would expose a command built with `--`', async (t) => {
  // Guards the guard: the same task handed to the distro shell does execute.
  const marker = join(tempDir(t), 'pwned')
  execFileSync(join(FIXTURE_BIN, 'wsl'), ['-d', 'Ubuntu', '--', 'echo', `$(touch ${marker})`], { stdio: 'ignore' })
  t.ok(existsSync(marker))
})

t.test('with wsl_distro, cwd is a path inside the distro and is not checked on the host', async (t) => {
  const app = await build(t, { AGENT_HOST_PLATFORM: 'win32' })
  const { status, body } = await post(app, 'crush_run', { task: 'x', wsl_distro: 'Ubuntu', cwd: '/home/dev/not-on-this-host' })
  t.equal(status, 200, 'no CWD_NOT_FOUND: the host does not know the distro paths')
  t.same(body.command.slice(0, 5), ['wsl', '-d', 'Ubuntu', '--cd', '/home/dev/not-on-this-host'])
})

t.test('on a Linux host the wsl fields are validated but not used', async (t) => {
  const app = await build(t, { AGENT_HOST_PLATFORM: 'linux' })
  const { body } = await post(app, 'crush_run', { task: 'x', wsl_distro: 'Ubuntu', wsl_user: 'dev' })
  t.same(body.command, ['crush', 'run', '--', 'x'])
})

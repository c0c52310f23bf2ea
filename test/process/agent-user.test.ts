import t from 'tap'
import { execFileSync } from 'node:child_process'
import { chownSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadConfig } from '#src/config.js'
import { chooseHostContainment } from '#src/process/host-containment.js'
import { build, runTool, scenario, startServer, tempDir } from '../helpers/index.js'
import { directoryOf, realUser } from '../helpers/users.js'

// AGENT_USER: the service (root) runs agents as another user, so its memory, files and secrets are not theirs.

const asRoot = process.getuid!() === 0
const namespaceAvailable = (await chooseHostContainment('auto')).containment.mode === 'pid-namespace'
const SECRET = 'studio-secret-4b1d'

// Each test starts services of its own: side by side.
t.jobs = 3

t.test('AGENT_USER is looked up at start, ' +
  'and refused when it cannot protect anything', { skip: !asRoot && 'only as root' }, async (t) => {
  t.match(loadConfig({ AGENT_USER: 'nobody' }).agentUser, {
    name: 'nobody', uid: 65534, gid: 65534, home: '/nonexistent'
  })
  t.throws(() => loadConfig({ AGENT_USER: 'root' }), /AGENT_USER=root is root/)
  t.throws(() => loadConfig({ AGENT_USER: 'no-such-user-here' }), /AGENT_USER=no-such-user-here: no such user/)
})

const modes = namespaceAvailable ? ['process-group', 'pid-namespace'] : ['process-group']
for (const mode of modes) {
  t.test(`${mode}: an agent run as AGENT_USER cannot read ` +
    `the service's environment`, { skip: !asRoot && 'only as root' }, async (t) => {
    const ask = async (env: Record<string, string>) => {
      const workdir = tempDir(t)
      // The agents' own directory: a service refuses one that belongs to anyone else.
      if (env['AGENT_USER'] !== undefined) chownSync(workdir, 65534, 65534)
      const { base } = await startServer(t, {
        API_TOKENS: `studio:${SECRET}`, AGENT_CONTAINMENT: mode, AGENT_WORKDIR: workdir, ...env
      })
      const { output } = await runTool(base, 'crush_run', { task: scenario.whoami() }, {
        authorization: `Bearer ${SECRET}`
      })
      const ready = await (await fetch(`${base}/readyz`, {
        headers: { authorization: `Bearer ${SECRET}` }
      })).json() as { isolation: { agents_can_reach: string[] } }
      return {
        raw: output,
        seen: JSON.parse(output.split('\n').find((line) => line.startsWith('{"uid"'))!),
        reach: ready.isolation.agents_can_reach
      }
    }
    // Two services side by side: the agent run as AGENT_USER, and (in process-group mode) the same without it.
    const [{ raw, seen, reach }, exposed] = await Promise.all([
      ask({ AGENT_USER: 'nobody' }), mode === 'process-group' ? ask({}) : undefined
    ])
    // Guards the guard: as the service's own user, the agent reads the service's environment and its tokens.
    if (exposed !== undefined) t.ok(exposed.raw.includes(SECRET), 'without AGENT_USER the token is within reach')
    // What /readyz says is what the agent met: the environment named where it was read, nothing where it was not.
    if (exposed !== undefined) {
      t.match(exposed.reach, [
        /^the service's secrets: the service's environment \(\/proc\/<pid>\/environ\)/, /every caller's runs/
      ])
    }
    t.same(reach, [], 'with AGENT_USER, nothing known to be open')
    t.match(seen, { uid: 65534, home: '/nonexistent', user: 'nobody' })
    t.notOk(raw.includes(SECRET), "the service's token is out of reach")
    if (mode === 'process-group') {
      t.equal(seen.parentEnvironment, 'EACCES', 'its parent, the service, is not its to read')
    }
  })
}

t.test('the version probe runs as AGENT_USER, as the agent will: ' +
  'what the CLI writes in its HOME stays the user\'s', { skip: !asRoot && 'only as root' }, async (t) => {
  const user = realUser('ar-probe', 'nopasswd')
  const dir = directoryOf(t, user)
  // A CLI that writes under HOME when asked its version, as opencode writes its log: root's file there would lock the
  // agent out of it.
  const cli = join(dir, 'crush')
  writeFileSync(
    cli,
    '#!/bin/sh\nmkdir -p "$HOME/.local/share/cli" && id -u >> "$HOME/.local/share/cli/probe.log"\necho "crush v9"\n',
    { mode: 0o755 }
  )
  chownSync(cli, user.uid, user.gid)
  const home = execFileSync('getent', ['passwd', user.name], { encoding: 'utf8' }).split(':')[5]!
  rmSync(join(home, '.local/share/cli'), { recursive: true, force: true })
  const app = await build(t, { AGENT_USER: user.name, AGENT_WORKDIR: join(dir, 'work'), CRUSH_BIN: cli })
  const ready = (await app.inject({ method: 'GET', url: '/readyz' })).json()
  t.match(ready.agents.find((agent: { tool: string }) => agent.tool === 'crush_run'), { version: 'crush v9' })
  const log = join(home, '.local/share/cli/probe.log')
  t.equal(readFileSync(log, 'utf8').trim(), String(user.uid), 'it ran as the user')
  t.equal(statSync(log).uid, user.uid, 'and what it wrote is the user\'s')
})

import t from 'tap'
import { chownSync } from 'node:fs'
import { loadConfig } from '#src/config.js'
import { chooseHostContainment } from '#src/process/host-containment.js'
import { runTool, scenario, startServer, tempDir } from '../helpers/index.js'

// AGENT_USER: the service (root) runs agents as another user, so its memory, files and secrets are not theirs.

const asRoot = process.getuid!() === 0
const namespaceAvailable = (await chooseHostContainment('auto')).containment.mode === 'pid-namespace'
const SECRET = 'studio-secret-4b1d'

// Each test starts services of its own: side by side.
t.jobs = 3

t.test('AGENT_USER is looked up at start, and refused when it cannot protect anything', { skip: !asRoot && 'only as root' }, async (t) => {
  t.match(loadConfig({ AGENT_USER: 'nobody' }).agentUser, { name: 'nobody', uid: 65534, gid: 65534, home: '/nonexistent' })
  t.throws(() => loadConfig({ AGENT_USER: 'root' }), /AGENT_USER=root is root/)
  t.throws(() => loadConfig({ AGENT_USER: 'no-such-user-here' }), /AGENT_USER=no-such-user-here: no such user/)
})

const modes = namespaceAvailable ? ['process-group', 'pid-namespace'] : ['process-group']
for (const mode of modes) {
  t.test(`${mode}: an agent run as AGENT_USER cannot read the service's environment`, { skip: !asRoot && 'only as root' }, async (t) => {
    const ask = async (env: Record<string, string>) => {
      const workdir = tempDir(t)
      // The agents' own directory: a service refuses one that belongs to anyone else.
      if (env['AGENT_USER'] !== undefined) chownSync(workdir, 65534, 65534)
      const { base } = await startServer(t, { API_TOKENS: `studio:${SECRET}`, AGENT_CONTAINMENT: mode, AGENT_WORKDIR: workdir, ...env })
      const { output } = await runTool(base, 'crush_run', { task: scenario.whoami() }, { authorization: `Bearer ${SECRET}` })
      const ready = await (await fetch(`${base}/readyz`, { headers: { authorization: `Bearer ${SECRET}` } })).json() as { isolation: { agents_can_reach: string[] } }
      return { raw: output, seen: JSON.parse(output.split('\n').find((line) => line.startsWith('{"uid"'))!), reach: ready.isolation.agents_can_reach }
    }
    // Two services side by side: the agent run as AGENT_USER, and (in process-group mode) the same without it.
    const [{ raw, seen, reach }, exposed] = await Promise.all([ask({ AGENT_USER: 'nobody' }), mode === 'process-group' ? ask({}) : undefined])
    // Guards the guard: as the service's own user, the agent reads the service's environment and its tokens.
    if (exposed !== undefined) t.ok(exposed.raw.includes(SECRET), 'without AGENT_USER the token is within reach')
    // What /readyz says is what the agent met: the environment named where it was read, nothing where it was not.
    if (exposed !== undefined) t.match(exposed.reach, [/^the service's secrets: the service's environment \(\/proc\/<pid>\/environ\)/, /every caller's runs/])
    t.same(reach, [], 'with AGENT_USER, nothing known to be open')
    t.match(seen, { uid: 65534, home: '/nonexistent', user: 'nobody' })
    t.notOk(raw.includes(SECRET), "the service's token is out of reach")
    if (mode === 'process-group') t.equal(seen.parentEnvironment, 'EACCES', 'its parent, the service, is not its to read')
  })
}

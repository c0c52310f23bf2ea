import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { call, echoed, runTool, startServer, tempDir, TEST_AGENT_ENV_ALLOW, until } from '../helpers/index.js'
import { NO_REDIS, redisEnv, startRedis } from '../helpers/redis.js'
import { NO_AGENT_HERE } from './fleet-hosts.js'
import type { FleetMember } from '#src/schemas/health.js'

// WSL runs go only to Windows workers (issue 40): a run with wsl_distro waits in a queue of its own, taken only by
// workers whose host runs agents inside WSL (AGENT_HOST_PLATFORM=win32, here with the wsl stand-in); a Linux worker,
// which would refuse it (WSL_NOT_AVAILABLE), is never offered one. Real service processes on a real redis-server.

const ALICE = { authorization: 'Bearer alice-secret' }

/**
 * The tasks a host's stand-ins were started with: every agent's (inside WSL too, where the stand-in distro runs the
 * same stand-ins), and those started through wsl.
 */
function startsIn(log: string): { inWsl: string[]; agents: string[] } {
  const entries = existsSync(log)
    ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>)
    : []
  const argvs = (key: string): string[][] => entries.flatMap((entry) => Array.isArray(entry[key]) ? [entry[key]] : [])
  return {
    // An agent's start, not the probes and signals sent into the distro.
    inWsl: argvs('wsl_argv').filter((argv) => argv.includes('setsid')).map((argv) => argv.at(-1)!),
    agents: argvs('argv').filter((argv) => argv[0] !== '--version').map((argv) => argv.at(-1)!)
  }
}

t.test('a WSL run is offered only to a Windows worker, which takes host runs too', { skip: NO_REDIS }, async (t) => {
  const { url } = await startRedis(t)
  const env = redisEnv(url, {
    API_TOKENS: 'alice:alice-secret',
    MAX_CRUSH_AGENTS: '2',
    WORKER_MAX_CRUSH_AGENTS: '1',
    AGENT_ENV_ALLOW: TEST_AGENT_ENV_ALLOW
  })
  const logs = { linux: join(tempDir(t), 'linux.log'), windows: join(tempDir(t), 'windows.log') }
  const [api] = await Promise.all([
    startServer(t, { ...env, ...NO_AGENT_HERE, ROLE: 'api' }),
    startServer(t, { ...env, ROLE: 'worker', STAND_IN_LOG: logs.linux }),
    startServer(t, { ...env, ROLE: 'worker', AGENT_HOST_PLATFORM: 'win32', STAND_IN_LOG: logs.windows })
  ])
  const members = await until(async () => {
    const { body } = await call(api.base, 'GET', '/readyz', { headers: ALICE })
    return (body as { fleet?: { members: FleetMember[] } }).fleet?.members ?? []
  }, (found) => found.filter(({ role }) => role === 'worker').length === 2, 15_000, 'both workers on the roll')
  t.same(members.map(({ role, places }) => `${role}: ${places!.join(' and ') || 'none'}`).sort(),
    ['api: none', 'worker: host', 'worker: host and wsl'], 'the roll says which worker runs agents in WSL')

  const tasks = ['first, in WSL', 'second, in WSL', 'third, in WSL']
  const answers = await Promise.all(tasks.map((task) =>
    runTool(api.base, 'crush_run', { task, wsl_distro: 'Ubuntu', queue_timeout: 60 }, ALICE)))
  t.same(answers.map((answer) => echoed(answer).prompt), tasks, 'each answered with what its agent was given')
  t.same(startsIn(logs.windows).inWsl.sort(), [...tasks].sort(), 'all run inside WSL by the Windows worker')
  t.same(startsIn(logs.linux), { inWsl: [], agents: [] }, 'none offered to the Linux worker')

  // A session continues where it ran: resumed without naming its distro, it still goes to the Windows worker.
  const first = await runTool(api.base, 'codex_run', { task: 'a session in WSL', wsl_distro: 'Ubuntu' }, ALICE)
  t.type(first.session_id, 'string', 'the session it left')
  for (const attempt of [1, 2, 3]) {
    const resumed = await runTool(api.base, 'codex_run', { task: `resumed ${attempt}`, resume: first.session_id! },
      ALICE)
    t.match(resumed, { ok: true }, `resumed ${attempt} inside WSL, where the session is`)
  }

  const onHost = await runTool(api.base, 'crush_run', { task: 'on a host', queue_timeout: 60 }, ALICE)
  t.equal(echoed(onHost).prompt, 'on a host', 'a host run is still run')
  const agents = [...startsIn(logs.linux).agents, ...startsIn(logs.windows).agents]
  t.equal(agents.filter((task) => task === 'on a host').length, 1, 'by one worker, once')
})

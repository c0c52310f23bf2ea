import t from 'tap'
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { agentVariables, toolNameOf } from '#src/agents/spec.js'
import { chooseHostContainment } from '#src/process/host-containment.js'
import {
  build, FIXTURE_BIN, isAlive, readPidFile, standInEnv, startServer, tempDir, until, waitFor
} from '../helpers/index.js'

// /healthz and /readyz (src/http/routes/health.ts, src/agents/readiness.ts): alive, and ready to run which agents.

/** Every agent but claude missing: /readyz then probes claude's version alone (each probe is a process). */
const ONLY_CLAUDE = Object.fromEntries(
  BUILT_IN_AGENTS.filter((spec) => spec.agent !== 'claude').map(
    (spec) => [agentVariables(spec).bin, `no-${spec.agent}-here`]
  )
)

/**
 * What the stand-in answers to --version, as the readiness probe asks it: each prints a version of its own CLI's
 * shape.
 */
const standInVersion = (bin: string): string =>
  execFileSync(join(FIXTURE_BIN, bin), ['--version'], { env: standInEnv(), encoding: 'utf8' }).split('\n')[0]!.trim()

t.test('readyz: each agent with its path and version; 503 when none is found', async (t) => {
  const app = await build(t)
  const ready = await app.inject({ method: 'GET', url: '/readyz' })
  t.equal(ready.statusCode, 200)
  t.match(ready.json(), {
    status: 'ready',
    agents: BUILT_IN_AGENTS.map((spec) => ({
      tool: toolNameOf(spec),
      bin: spec.defaultBin,
      path: `${FIXTURE_BIN}/${spec.defaultBin}`,
      version: standInVersion(spec.defaultBin)
    }))
  })

  const log = join(tempDir(t), 'starts.log')
  const counted = await build(t, {}, standInEnv({ STAND_IN_LOG: log }))
  for (let probe = 0; probe < 3; probe++) {
    t.equal((await counted.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)
  }
  const versionCalls = readFileSync(log, 'utf8').trim().split('\n').map(
    (line) => JSON.parse(line).version
  ).filter(Boolean)
  // Each stand-in logs its own agent's name when asked its version.
  t.same(
    versionCalls.sort(), BUILT_IN_AGENTS.map((spec) => spec.agent).sort(),
    'each version asked once for three readiness checks'
  )

  const missing = await build(t, { ...ONLY_CLAUDE, CLAUDE_BIN: '/nowhere/claude' })
  const unavailable = await missing.inject({ method: 'GET', url: '/readyz' })
  t.equal(unavailable.statusCode, 503)
  t.match(unavailable.json(), {
    status: 'unavailable', agents: BUILT_IN_AGENTS.map(() => ({ path: null, version: null }))
  })
  t.equal((await missing.inject({ method: 'GET', url: '/healthz' })).json().status, 'ok', 'alive all the same')
})

t.test('/readyz says when claude cannot run as configured, ' +
  'and which variable to change', { skip: process.getuid!() !== 0 && 'only as root' }, async (t) => {
  const claudeOf = async (overrides: Record<string, string>, env: NodeJS.ProcessEnv = standInEnv()) => {
    const app = await build(t, { ...ONLY_CLAUDE, ...overrides }, env)
    const headers = { authorization: 'Bearer secret-a' }
    const ready = (await app.inject({ method: 'GET', url: '/readyz', headers })).json<{
      status: string
      agents: Array<{ tool: string; problem: string | null }>
    }>()
    return { status: ready.status, claude: ready.agents.find((agent) => agent.tool === 'claude_run')! }
  }
  const refused = await claudeOf({})
  t.match(refused.claude, {
    problem: new RegExp(
      String.raw`claude refuses CLAUDE_PERMISSION_MODE=bypassPermissions when run as root: ` +
        String.raw`.*set AGENT_USER.*set CLAUDE_PERMISSION_MODE`
    )
  })
  t.equal(refused.status, 'unavailable', 'no agent that can run: not ready')
  const fixed = await claudeOf({ CLAUDE_PERMISSION_MODE: 'acceptEdits' })
  t.match(
    fixed, { status: 'ready', claude: { problem: null } }, 'another mode: claude can run, so the service is ready'
  )
  t.match(
    await claudeOf({}, standInEnv({ IS_SANDBOX: '1' })), { status: 'ready', claude: { problem: null } },
    'inside a sandbox claude accepts it'
  )
  t.match(
    await claudeOf({ AGENT_USER: 'nobody' }), { status: 'ready', claude: { problem: null } },
    'a root service running claude as AGENT_USER: claude is not root'
  )
  t.match(
    await claudeOf({ AGENT_USERS: '61620-61629', API_TOKENS: 'alice:secret-a' }),
    { status: 'ready', claude: { problem: null } },
    'nor as AGENT_USERS, each token’s agents a uid of its own'
  )
})

t.test('a version probe still running when the service closes is ended with it', async (t) => {
  const dir = tempDir(t)
  const pidFile = join(dir, 'probe.pid')
  const hanging = join(dir, 'hangs-on-version')
  // Like a CLI stuck at start-up (a Node binary waiting on a lock): it never answers --version.
  writeFileSync(hanging, `#!/bin/sh\necho $$ > '${pidFile}'\nexec sleep 120\n`, { mode: 0o755 })
  const app = await build(t, { ...ONLY_CLAUDE, CLAUDE_BIN: hanging })
  const ready = app.inject({ method: 'GET', url: '/readyz' })
  const probe = await readPidFile(pidFile)
  t.ok(isAlive(probe), 'the probe is running')
  await app.close()
  await waitFor(() => !isAlive(probe), 3000, 'the probe to end')
  t.notOk(isAlive(probe), 'closing the service ended the probe, well before its own timeout')
  const agents = (await ready).json<{ agents: Array<{ tool: string }> }>().agents
  t.match(agents.find((agent) => agent.tool === 'claude_run'), { path: hanging, version: null })
})

const namespaceAvailable = (await chooseHostContainment('auto')).containment.mode === 'pid-namespace'

t.test('a version probe does not outlive a ' +
  'service killed with SIGKILL', { skip: !namespaceAvailable && 'no setpriv and PID namespaces here' }, async (t) => {
  const dir = tempDir(t)
  const pidFile = join(dir, 'probe.pid')
  const hanging = join(dir, 'hangs-on-version')
  writeFileSync(hanging, `#!/bin/sh\necho $$ > '${pidFile}'\nexec sleep 120\n`, { mode: 0o755 })
  // The service asks every agent its version as it opens, for its startup summary.
  const server = await startServer(t, { ...ONLY_CLAUDE, CLAUDE_BIN: hanging, AGENT_CONTAINMENT: 'pid-namespace' })
  const probe = await readPidFile(pidFile)
  t.teardown(() => { if (isAlive(probe)) process.kill(probe, 'SIGKILL') })
  t.ok(isAlive(probe), 'the probe is running')
  server.child.kill('SIGKILL')
  t.equal(
    await until(() => isAlive(probe), (alive) => !alive, 10_000, 'the probe to die with the service'), false,
    'the parent-death signal ended it'
  )
})

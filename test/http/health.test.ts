import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { chooseHostContainment } from '#src/process/host-containment.js'
import { build, FIXTURE_BIN, isAlive, readPidFile, standInEnv, startServer, tempDir, until, waitFor } from '../helpers/index.js'

// /healthz and /readyz (src/http/routes/health.ts, src/agents/readiness.ts): alive, and ready to run which agents.

/** Every agent but claude missing: /readyz then probes claude's version alone (each probe is a process). */
const ONLY_CLAUDE = { CRUSH_BIN: 'no-crush-here', GEMINI_BIN: 'no-gemini-here', CODEX_BIN: 'no-codex-here', OPENCODE_BIN: 'no-opencode-here' }

t.test('readyz: each agent with its path and version; 503 when none is found', async (t) => {
  const app = await build(t)
  const ready = await app.inject({ method: 'GET', url: '/readyz' })
  t.equal(ready.statusCode, 200)
  t.match(ready.json(), {
    status: 'ready',
    agents: [
      { tool: 'crush_run', bin: 'crush', path: `${FIXTURE_BIN}/crush`, version: 'crush version v0.0.0-stand-in' },
      { tool: 'claude_run', bin: 'claude', path: `${FIXTURE_BIN}/claude`, version: '2.1.197 (Claude Code stand-in)' },
      { tool: 'gemini_run', bin: 'gemini', path: `${FIXTURE_BIN}/gemini`, version: '0.61.0' },
      { tool: 'codex_run', bin: 'codex', path: `${FIXTURE_BIN}/codex`, version: 'codex-cli 0.171.0' },
      { tool: 'opencode_run', bin: 'opencode', path: `${FIXTURE_BIN}/opencode`, version: '1.18.33' }
    ]
  })

  const log = join(tempDir(t), 'starts.log')
  const counted = await build(t, {}, standInEnv({ STAND_IN_LOG: log }))
  for (let probe = 0; probe < 3; probe++) t.equal((await counted.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)
  const versionCalls = readFileSync(log, 'utf8').trim().split('\n').map((line) => JSON.parse(line).version).filter(Boolean)
  t.same(versionCalls.sort(), ['claude', 'codex', 'crush', 'gemini', 'opencode'], 'each version asked once for three readiness checks')

  const missing = await build(t, { ...ONLY_CLAUDE, CLAUDE_BIN: '/nowhere/claude' })
  const unavailable = await missing.inject({ method: 'GET', url: '/readyz' })
  t.equal(unavailable.statusCode, 503)
  t.match(unavailable.json(), { status: 'unavailable', agents: Array.from({ length: 5 }, () => ({ path: null, version: null })) })
  t.equal((await missing.inject({ method: 'GET', url: '/healthz' })).json().status, 'ok', 'alive all the same')
})

t.test('/readyz says when claude cannot run as configured, and which variable to change', { skip: process.getuid!() !== 0 && 'only as root' }, async (t) => {
  const claudeOf = async (overrides: Record<string, string>, env: NodeJS.ProcessEnv = standInEnv()) => {
    const app = await build(t, { ...ONLY_CLAUDE, ...overrides }, env)
    const ready = (await app.inject({ method: 'GET', url: '/readyz' })).json<{ status: string; agents: Array<{ tool: string; problem: string | null }> }>()
    return { status: ready.status, claude: ready.agents.find((agent) => agent.tool === 'claude_run')! }
  }
  const refused = await claudeOf({})
  t.match(refused.claude, { problem: /claude refuses CLAUDE_PERMISSION_MODE=bypassPermissions when run as root: .*set AGENT_USER.*set CLAUDE_PERMISSION_MODE/ })
  t.equal(refused.status, 'unavailable', 'no agent that can run: not ready')
  const fixed = await claudeOf({ CLAUDE_PERMISSION_MODE: 'acceptEdits' })
  t.match(fixed, { status: 'ready', claude: { problem: null } }, 'another mode: claude can run, so the service is ready')
  t.match(await claudeOf({}, standInEnv({ IS_SANDBOX: '1' })), { status: 'ready', claude: { problem: null } }, 'inside a sandbox claude accepts it')
  t.match(await claudeOf({ AGENT_USER: 'nobody' }), { status: 'ready', claude: { problem: null } }, 'a root service running claude as AGENT_USER: claude is not root')
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
  t.notOk(isAlive(probe), 'closing the service ended the probe, well before its own 5 s timeout')
  t.match((await ready).json(), { agents: [{}, { tool: 'claude_run', path: hanging, version: null }] })
})

const namespaceAvailable = (await chooseHostContainment('auto')).containment.mode === 'pid-namespace'

t.test('a version probe does not outlive a service killed with SIGKILL', { skip: !namespaceAvailable && 'no setpriv and PID namespaces here' }, async (t) => {
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
  t.equal(await until(() => isAlive(probe), (alive) => !alive, 10_000, 'the probe to die with the service'), false, 'the parent-death signal ended it')
})

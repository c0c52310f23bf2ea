import t from 'tap'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { isAlive, readPidFile, SERVER, standInEnv, startServer, tempDir, waitFor } from './helper.js'

const postJson = (base: string, path: string, body: unknown) =>
  fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })

t.test('SIGTERM: stop accepting, stop the agents, answer their requests, exit 0', async (t) => {
  const pidFile = join(tempDir(t), 'agent.pid')
  const { child, base, logs } = await startServer(t, { AGENT_KILL_GRACE_MS: '300', LOG_LEVEL: 'info' })
  // Logged once the agents have been looked up, just after listening.
  await waitFor(() => logs.some((entry) => String(entry['msg']).startsWith('agent-runner ready')), 10_000, 'the startup summary')
  const pending = postJson(base, '/tools/crush_run', { task: `@write-pid ${pidFile} 60000` })
  const agent = await readPidFile(pidFile)
  // A spare connection that never sends a request (as proxies keep) must not hold the shutdown open.
  const spare = connect(Number(new URL(base).port), '127.0.0.1')
  await once(spare, 'connect')
  spare.on('error', () => {})
  const exited = once(child, 'exit')
  child.kill('SIGTERM')

  const response = await pending
  t.equal(response.status, 200)
  t.match(await response.json(), { stop_reason: 'shutdown', ok: false })
  const [code, signal] = await exited
  t.equal(code, 0, 'exit code 0')
  t.equal(signal, null)
  t.notOk(isAlive(agent), 'the agent is gone')
  await t.rejects(postJson(base, '/tools/crush_run', { task: 'late' }), 'no longer accepting')

  const started = logs.find((entry) => entry['msg'] === 'agent run started')
  const ended = logs.find((entry) => entry['msg'] === 'agent run ended')
  t.match(started, { tool: 'crush_run', agent_pid: agent, reqId: String })
  t.match(ended, { tool: 'crush_run', agent_pid: agent, reqId: started?.['reqId'], exit_code: 1, duration_ms: Number, stop_reason: 'shutdown' })
  t.notOk(JSON.stringify(logs).includes('@write-pid'), 'the task itself is not logged')
  const ready = logs.find((entry) => String(entry['msg']).startsWith('agent-runner ready'))
  t.match(ready, {
    msg: 'agent-runner ready: crush_run, claude_run',
    agents: [{ tool: 'crush_run', path: /crush$/, version: 'crush version v0.0.0-stand-in' }, { tool: 'claude_run', path: /claude$/ }],
    limits: { crush_run: 2, claude_run: 2 },
    auth: 'none: loopback only, Host and Origin checked',
    containment: 'process-group',
    docs: /^http:\/\/127\.0\.0\.1:\d+\/docs$/
  }, 'the startup log says what runs, how many, who may call, how contained, and where the docs are')
})

t.test('a bad configuration value stops the server with a message naming the variable', async (t) => {
  const bad: Array<[string, string]> = [['PORT', 'eighty'], ['MAX_CRUSH_AGENTS', '0'], ['AGENT_HOST_PLATFORM', 'plan9'], ['CLAUDE_EXTRA_ARGS', '--model sonnet']]
  for (const [variable, value] of bad) {
    const child = spawn(process.execPath, [SERVER], { env: standInEnv({ [variable]: value }), stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr!.on('data', (chunk) => (stderr += chunk))
    const [code] = await once(child, 'exit')
    t.equal(code, 1, `${variable}=${value} stops the server`)
    t.match(stderr, new RegExp(`invalid configuration: .*${variable}`), `the message names ${variable}`)
  }
})

t.test('.env in the working directory is read, under the real environment', async (t) => {
  const dir = tempDir(t)
  writeFileSync(join(dir, '.env'), 'MAX_CRUSH_AGENTS=7\nPORT=1\n')
  const { base } = await startServer(t, { PORT: '0' }, dir)
  // MAX_CRUSH_AGENTS came from .env (it shows in the 429 message); PORT=0 from the environment won over PORT=1.
  const runs = Array.from({ length: 8 }, () => postJson(base, '/tools/crush_run', { task: '@sleep 1000' }))
  const statuses = await Promise.all(runs.map(async (run) => (await run).status))
  t.same(statuses.filter((status) => status === 429).length, 1)
  t.same(statuses.filter((status) => status === 200).length, 7)
})

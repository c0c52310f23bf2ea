import t from 'tap'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { closeSync, cpSync, mkdirSync, openSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { toolNameOf } from '#src/agents/spec.js'
import {
  call, createRun, FIXTURE_BIN, isAlive, readPidFile, runTool, scenario, SERVER, standInEnv, startServer, tempDir,
  waitFor
} from './helpers/index.js'
import { fromRoot } from './helpers/root.js'

const postJson = (base: string, path: string, body: unknown) =>
  fetch(`${base}${path}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body)
  })

// Each test starts a service process of its own, on port 0 with its own data directory: side by side.
t.jobs = 3

t.test('SIGTERM: stop accepting, stop the agents (synchronous and async runs), answer their requests, ' +
  'exit 0', async (t) => {
  const pidFile = join(tempDir(t), 'agent.pid')
  const asyncPidFile = join(tempDir(t), 'async.pid')
  const { child, base, logs } = await startServer(t, {
    AGENT_KILL_GRACE_MS: '300', LOG_LEVEL: 'info', AGENT_LIMITS: 'off'
  })
  // Logged once the agents have been looked up, just after listening.
  await waitFor(
    () => logs.some((entry) => String(entry['msg']).startsWith('agent-runner ready')), 10_000, 'the startup summary'
  )
  const pending = postJson(base, '/tools/crush_run', { task: scenario.writePid(pidFile, 60000) })
  const agent = await readPidFile(pidFile)
  t.match(
    await createRun(base, { tool: 'crush_run', task: scenario.writePid(asyncPidFile, 60000) }), { status: 'running' }
  )
  const asyncAgent = await readPidFile(asyncPidFile)
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
  t.notOk(isAlive(asyncAgent), 'the async run’s agent is gone')
  await t.rejects(postJson(base, '/tools/crush_run', { task: 'late' }), 'no longer accepting')

  const started = logs.find((entry) => entry['msg'] === 'agent run started' && entry['agent_pid'] === agent)
  const ended = logs.find((entry) => entry['msg'] === 'agent run ended' && entry['agent_pid'] === agent)
  t.match(started, { tool: 'crush_run', agent_pid: agent, reqId: String })
  t.match(ended, {
    tool: 'crush_run',
    agent_pid: agent,
    reqId: started?.['reqId'],
    exit_code: 1,
    duration_ms: Number,
    stop_reason: 'shutdown'
  })
  t.notOk(JSON.stringify(logs).includes('@write-pid'), 'the task itself is not logged')
  const ready = logs.find((entry) => String(entry['msg']).startsWith('agent-runner ready'))
  // Every agent of the catalog: each has its stand-in on the PATH, at MAX_<AGENT>_AGENTS's default.
  const tools = BUILT_IN_AGENTS.map(toolNameOf)
  t.match(ready, {
    msg: `agent-runner ready: ${tools.join(', ')}`,
    agents: BUILT_IN_AGENTS.map(
      (spec) => ({ tool: toolNameOf(spec), path: `${FIXTURE_BIN}/${spec.defaultBin}`, version: String })
    ),
    limits: Object.fromEntries(tools.map((tool) => [tool, 2])),
    auth: 'none: loopback only, Host and Origin checked',
    containment: {
      mode: 'process-group',
      reason: 'AGENT_CONTAINMENT=process-group',
      escapes: /clears its environment.*apt-get install tini/,
      limits: 'none: AGENT_LIMITS=off'
    },
    docs: /^http:\/\/127\.0\.0\.1:\d+\/docs$/
  }, 'the startup log says what runs, how many, who may call, how contained, and where the docs are')
})

t.test('a bad configuration value stops the server with a message naming the variable', async (t) => {
  // One process is enough to show how the server stops: test/config.test.ts shows each variable's refusal in-process.
  const child = spawn(process.execPath, [SERVER], {
    env: standInEnv({ MAX_CRUSH_AGENTS: '0' }), stdio: ['ignore', 'pipe', 'pipe']
  })
  let stderr = ''
  child.stderr.on('data', (chunk) => (stderr += chunk))
  const [code] = await once(child, 'exit')
  t.equal(code, 1, 'MAX_CRUSH_AGENTS=0 stops the server')
  t.match(stderr, /invalid configuration: .*MAX_CRUSH_AGENTS/, 'the message names MAX_CRUSH_AGENTS')
})

t.test('a native module built for another Node stops the start with one line saying what to run', async (t) => {
  // A copy of the service whose better-sqlite3 addon is not a loadable library: what a clone built with another Node,
  // or copied from another platform, meets at dlopen.
  const root = tempDir(t)
  cpSync(fromRoot('dist'), join(root, 'dist'), { recursive: true })
  cpSync(fromRoot('package.json'), join(root, 'package.json'))
  mkdirSync(join(root, 'node_modules'))
  for (const name of readdirSync(fromRoot('node_modules'))) {
    if (name !== 'better-sqlite3') symlinkSync(fromRoot('node_modules', name), join(root, 'node_modules', name))
  }
  const addon = join(root, 'node_modules/better-sqlite3')
  cpSync(fromRoot('node_modules/better-sqlite3/lib'), join(addon, 'lib'), { recursive: true })
  cpSync(fromRoot('node_modules/better-sqlite3/package.json'), join(addon, 'package.json'))
  mkdirSync(join(addon, 'build/Release'), { recursive: true })
  writeFileSync(join(addon, 'build/Release/better_sqlite3.node'), 'not an ELF file')
  const child = spawn(process.execPath, [join(root, 'dist/server.js')], {
    env: standInEnv({ PORT: '0', DATA_DIR: join(root, 'data') }), stdio: ['ignore', 'pipe', 'pipe']
  })
  let stderr = ''
  child.stderr.on('data', (chunk) => (stderr += chunk))
  child.stdout.resume()
  const [code] = await once(child, 'exit')
  t.equal(code, 1)
  t.match(
    stderr,
    new RegExp(
      String.raw`^agent-runner: cannot start: better-sqlite3 cannot load in Node v[\d.]+ \(linux-\w+\): .*` +
        'Run `npm rebuild better-sqlite3` with this Node, or set RUNS_STORE=memory\\n$'
    )
  )
})

t.test('a descriptor the service was started with (a shell\'s 200>file) never reaches an agent', async (t) => {
  const secrets = join(tempDir(t), 'secrets.log')
  writeFileSync(secrets, 'what the shell that started the service was writing\n')
  const fd = openSync(secrets, 'a')
  t.teardown(() => closeSync(fd))
  const { base, logs } = await startServer(t, {}, { inherit: fd })
  const { output } = await runTool(base, 'crush_run', { task: scenario.fds() })
  const targets = JSON.parse(output.split('\n').find((line) => line.startsWith('['))!) as string[]
  t.ok(targets.length > 0, `the agent's descriptors: ${targets.join(', ')}`)
  t.notOk(targets.includes(secrets), 'not the file the service inherited')
  t.ok(
    logs.some((entry) => entry['msg'] === 'closed descriptors inherited at start: agents get stdio only'),
    'the start says so'
  )
})

t.test('.env in the working directory is read, under the real environment', async (t) => {
  const dir = tempDir(t)
  writeFileSync(join(dir, '.env'), 'MAX_CRUSH_AGENTS=7\nPORT=1\n', { mode: 0o600 })
  const { base } = await startServer(t, { PORT: '0' }, { cwd: dir })
  // PORT=0 from the environment won over PORT=1 from .env: the server listens on a port of the system's choosing.
  t.not(new URL(base).port, '1')
  // MAX_CRUSH_AGENTS came from .env (the default is 2).
  const { body } = await call(base, 'GET', '/tools')
  t.match(body.tools.find((tool: { name: string }) => tool.name === 'crush_run'), { limit: 7 })
})

import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { buildApp, loggerOptions } from '../src/http/app.js'
import { loadConfig } from '../src/config.js'
import { build, FIXTURE_BIN, post, standInEnv, tempDir, TEST_AGENT_ENV_ALLOW, testConfig, waitFor } from './helper.js'

const TOKEN = 'test-token-5f1c0a'

t.test('with API_TOKENS, /tools routes need a right bearer token; health stays open', async (t) => {
  const app = await build(t, { API_TOKENS: `other-token, ${TOKEN}` })
  const ask = (url: string, method: 'GET' | 'POST', authorization?: string) =>
    app.inject({ method, url, payload: method === 'POST' ? { task: 'x' } : undefined, headers: authorization ? { authorization } : {} })

  for (const [url, method] of [['/tools/crush_run', 'POST'], ['/tools/claude_run', 'POST'], ['/tools', 'GET']] as const) {
    for (const authorization of [undefined, 'Bearer wrong', `Basic ${TOKEN}`, `Bearer ${TOKEN}x`, 'Bearer ']) {
      const response = await ask(url, method, authorization)
      t.equal(response.statusCode, 401, `${method} ${url} with ${authorization ?? 'no header'}`)
      t.equal(response.headers['www-authenticate'], 'Bearer realm="agent-runner"')
      t.same(Object.keys(response.json()).sort(), ['code', 'error', 'message', 'statusCode'])
      t.equal(response.json().code, 'UNAUTHORIZED')
    }
    t.equal((await ask(url, method, `Bearer ${TOKEN}`)).statusCode, 200, `${method} ${url} with the right token`)
    t.equal((await ask(url, method, 'Bearer other-token')).statusCode, 200, 'any configured token')
  }
  t.equal((await ask('/healthz', 'GET')).statusCode, 200, 'healthz needs no token')
  const anonymous = await ask('/readyz', 'GET')
  t.equal(anonymous.statusCode, 200, 'readyz needs no token')
  t.same(anonymous.json(), { status: 'ready' }, 'but without one it says only ready or not')
  t.same(Object.keys((await ask('/readyz', 'GET', 'Bearer wrong')).json()), ['status'])
  t.match((await ask('/readyz', 'GET', `Bearer ${TOKEN}`)).json(), { status: 'ready', agents: [{ tool: 'crush_run', path: String }], slots: { ok: true }, containment: { mode: String } }, 'details for a token holder')
  t.equal(app.slots.inUse('crush_run'), 0, 'refused requests took no slot')
})

t.test('tokens and Authorization headers never reach the logs', async (t) => {
  const lines: string[] = []
  const stream = new Writable({ write: (chunk, _encoding, done) => (lines.push(String(chunk)), done()) })
  const config = testConfig({ API_TOKENS: TOKEN, LOG_LEVEL: 'trace' })
  // The service's own logger settings, only written to a stream the test reads.
  const app = await buildApp(config, { logger: { ...(loggerOptions(config) as object), stream }, agentEnv: standInEnv() })
  t.teardown(() => app.close())
  await app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: 'x' }, headers: { authorization: `Bearer ${TOKEN}` } })
  await app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: 'x' }, headers: { authorization: `Bearer ${TOKEN}-wrong` } })
  t.ok(lines.some((line) => line.includes('unauthorized')), 'the refused request was logged')
  t.notOk(lines.join('').includes(TOKEN), 'no token in any log line')
})

t.test("a named token's name, never its secret, tags the run's log lines", async (t) => {
  const lines: string[] = []
  const stream = new Writable({ write: (chunk, _encoding, done) => (lines.push(String(chunk)), done()) })
  const config = testConfig({ API_TOKENS: `studio:${TOKEN}`, LOG_LEVEL: 'info' })
  const app = await buildApp(config, { logger: { ...(loggerOptions(config) as object), stream }, agentEnv: standInEnv() })
  t.teardown(() => app.close())
  await app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: 'x' }, headers: { authorization: `Bearer ${TOKEN}` } })
  const entries = lines.map((line) => JSON.parse(line))
  t.match(entries.find((entry) => entry.msg === 'agent run started'), { caller: 'studio', tool: 'crush_run', agent_pid: Number, run: String })
  t.match(entries.find((entry) => entry.msg === 'agent run ended'), { caller: 'studio' })
  t.notOk(lines.join('').includes(TOKEN), 'no secret in any log line')
  t.ok(entries.every((entry) => !('pid' in entry) || entry.pid === process.pid), "the agent's pid never takes pino's `pid` key")
})

t.test('the server refuses a non-loopback HOST without a token, unless told to', async (t) => {
  t.throws(() => loadConfig({ HOST: '0.0.0.0' }), /HOST=0\.0\.0\.0 .*API_TOKENS.*ALLOW_UNAUTHENTICATED=true/)
  t.throws(() => loadConfig({ HOST: '::' }), /API_TOKENS/)
  t.throws(() => loadConfig({ HOST: '192.168.1.10' }), /API_TOKENS/)
  t.doesNotThrow(() => loadConfig({ HOST: '0.0.0.0', API_TOKENS: TOKEN }))
  t.doesNotThrow(() => loadConfig({ HOST: '0.0.0.0', ALLOW_UNAUTHENTICATED: 'true' }))
  for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', '::1']) t.doesNotThrow(() => loadConfig({ HOST: host }), host)
})

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

  const missing = await build(t, { CRUSH_BIN: 'no-such-crush', CLAUDE_BIN: '/nowhere/claude', GEMINI_BIN: 'no-such-gemini', CODEX_BIN: 'no-such-codex', OPENCODE_BIN: 'no-such-opencode' })
  const unavailable = await missing.inject({ method: 'GET', url: '/readyz' })
  t.equal(unavailable.statusCode, 503)
  t.match(unavailable.json(), { status: 'unavailable', agents: Array.from({ length: 5 }, () => ({ path: null, version: null })) })
  t.equal((await missing.inject({ method: 'GET', url: '/healthz' })).json().status, 'ok', 'alive all the same')
})

t.test('GET /tools counts slots while runs are in flight', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '3', MAX_CLAUDE_AGENTS: '1' })
  const status = async () => (await app.inject({ method: 'GET', url: '/tools' })).json().tools
  t.same(await status(), [
    { name: 'crush_run', agent: 'crush', limit: 3, in_use: 0, free: 3 },
    { name: 'claude_run', agent: 'claude', limit: 1, in_use: 0, free: 1 },
    { name: 'gemini_run', agent: 'gemini', limit: 2, in_use: 0, free: 2 },
    { name: 'codex_run', agent: 'codex', limit: 2, in_use: 0, free: 2 },
    { name: 'opencode_run', agent: 'opencode', limit: 2, in_use: 0, free: 2 }
  ])
  const runs = [post(app, 'crush_run', { task: '@sleep 800' }), post(app, 'crush_run', { task: '@sleep 800' }), post(app, 'claude_run', { task: '@sleep 800' })]
  await waitFor(() => app.slots.inUse('crush_run') === 2 && app.slots.inUse('claude_run') === 1, 5000, 'runs in flight')
  t.same(await status(), [
    { name: 'crush_run', agent: 'crush', limit: 3, in_use: 2, free: 1 },
    { name: 'claude_run', agent: 'claude', limit: 1, in_use: 1, free: 0 },
    { name: 'gemini_run', agent: 'gemini', limit: 2, in_use: 0, free: 2 },
    { name: 'codex_run', agent: 'codex', limit: 2, in_use: 0, free: 2 },
    { name: 'opencode_run', agent: 'opencode', limit: 2, in_use: 0, free: 2 }
  ])
  await Promise.all(runs)
  t.match(await status(), [{ in_use: 0 }, { in_use: 0 }])
})

t.test('the agent gets its provider keys and never the service secrets', async (t) => {
  const app = await build(t, { API_TOKENS: TOKEN }, standInEnv({
    API_TOKENS: TOKEN,
    ANTHROPIC_API_KEY: 'sk-ant-test',
    OPENAI_API_KEY: 'sk-openai-test',
    CLAUDE_CONFIG_DIR: '/cfg',
    XDG_CONFIG_HOME: '/xdg',
    REDIS_URL: 'redis://secret',
    SOME_UNRELATED_SECRET: 'nope',
    XDG_RUNTIME_DIR: '/run/user/1000',
    DBUS_SESSION_BUS_ADDRESS: 'unix:path=/run/user/1000/bus',
    LANG: 'fr_FR.UTF-8'
  }))
  const response = await app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: '@env' }, headers: { authorization: `Bearer ${TOKEN}` } })
  const env = JSON.parse(response.json().output)
  t.match(env, { ANTHROPIC_API_KEY: 'sk-ant-test', OPENAI_API_KEY: 'sk-openai-test', XDG_CONFIG_HOME: '/xdg', LANG: 'fr_FR.UTF-8', PATH: String, HOME: String })
  t.notOk('CLAUDE_CONFIG_DIR' in env, 'Claude’s settings are Claude’s alone')
  // The last two would let `systemd-run --user` start a process outside the run's containment.
  for (const name of ['API_TOKENS', 'REDIS_URL', 'SOME_UNRELATED_SECRET', 'XDG_RUNTIME_DIR', 'DBUS_SESSION_BUS_ADDRESS']) t.notOk(name in env, `${name} is not passed on`)

  // Each agent gets its own providers' keys, not the others'.
  const envOf = async (tool: string) => {
    const output: string = (await app.inject({ method: 'POST', url: `/tools/${tool}`, payload: { task: '@env' }, headers: { authorization: `Bearer ${TOKEN}` } })).json().output
    return JSON.parse(output.split('\n').find((line) => line.startsWith('{"') && line.includes('"PATH"'))!)
  }
  const claude = await envOf('claude_run')
  t.match(claude, { ANTHROPIC_API_KEY: 'sk-ant-test', CLAUDE_CONFIG_DIR: '/cfg' })
  t.notOk('OPENAI_API_KEY' in claude, 'claude does not see the OpenAI key')
  const codex = await envOf('codex_run')
  t.match(codex, { OPENAI_API_KEY: 'sk-openai-test' })
  t.notOk('ANTHROPIC_API_KEY' in codex || 'CLAUDE_CONFIG_DIR' in codex, 'codex sees neither Anthropic’s key nor Claude’s settings')
})

t.test('the allow and deny lists are configurable; deny wins, and API_TOKENS can never be allowed', async (t) => {
  const app = await build(t, { AGENT_ENV_ALLOW: `${TEST_AGENT_ENV_ALLOW},MY_*,API_TOKENS`, AGENT_ENV_DENY: 'MY_PRIVATE' }, standInEnv({
    MY_SETTING: 'yes',
    MY_PRIVATE: 'no',
    API_TOKENS: TOKEN
  }))
  const env = JSON.parse((await post(app, 'crush_run', { task: '@env' })).body.output)
  t.equal(env.MY_SETTING, 'yes')
  t.notOk('MY_PRIVATE' in env)
  t.notOk('API_TOKENS' in env)
})

t.test('on Windows, the variables meant for the distro travel through WSLENV', async (t) => {
  const app = await build(t, { AGENT_HOST_PLATFORM: 'win32' }, standInEnv({ ANTHROPIC_API_KEY: 'sk-ant-test', WSLENV: 'EXISTING/u' }))
  const env = JSON.parse((await post(app, 'crush_run', { task: '@env', wsl_distro: 'Ubuntu' })).body.output.split('\n').find((line: string) => line.startsWith('{"') && !line.startsWith('{"wsl_argv')))
  const names = env.WSLENV.split(':')
  t.ok(names.includes('ANTHROPIC_API_KEY'), 'the provider key crosses into the distro')
  t.ok(names.includes('EXISTING/u'), 'what WSLENV already said is kept')
  t.notOk(names.includes('PATH'), 'the Windows PATH does not replace the distro’s')
})

t.test('/readyz says when claude cannot run as configured, and which variable to change', { skip: process.getuid!() !== 0 && 'only as root' }, async (t) => {
  const claudeOf = async (overrides: Record<string, string>, env: NodeJS.ProcessEnv = standInEnv()) => {
    const app = await build(t, overrides, env)
    return ((await app.inject({ method: 'GET', url: '/readyz' })).json().agents as Array<{ tool: string; problem: string | null }>).find((agent) => agent.tool === 'claude_run')!
  }
  t.match(await claudeOf({}), { problem: /claude refuses CLAUDE_PERMISSION_MODE=bypassPermissions when run as root: .*set CLAUDE_PERMISSION_MODE/ })
  t.match(await claudeOf({ CLAUDE_PERMISSION_MODE: 'acceptEdits' }), { problem: null })
  t.match(await claudeOf({}, standInEnv({ IS_SANDBOX: '1' })), { problem: null })
  const onlyClaude = await build(t, { CRUSH_BIN: 'no-crush-here', GEMINI_BIN: 'no-gemini-here', CODEX_BIN: 'no-codex-here', OPENCODE_BIN: 'no-opencode-here' })
  t.equal((await onlyClaude.inject({ method: 'GET', url: '/readyz' })).statusCode, 503, 'no agent that can run: not ready')
})

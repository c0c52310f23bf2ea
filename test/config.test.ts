import t from 'tap'
import { loggerOptions } from '#src/http/app.js'
import { loadConfig, parseApiTokens } from '#src/config.js'
import { whatAgentsCanReach } from '#src/isolation.js'
import { secretFileProblem } from '#src/secret-files.js'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import type { AgentSpec } from '#src/agents/spec.js'
import { chmodSync, chownSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { join } from 'node:path'
import { build, echoed, runTool } from './helpers/index.js'

/** An agent's own settings as its spec declares them by default (CLAUDE_PERMISSION_MODE…). */
const ownDefaults = (spec: AgentSpec): Record<string, unknown> =>
  Object.fromEntries(Object.entries(spec.ownSettings ?? {}).map(([name, schema]) => [name, schema.default]))

t.test('defaults', async (t) => {
  const config = loadConfig({})
  t.match(config, {
    host: '127.0.0.1',
    port: 8080,
    logLevel: 'info',
    hostPlatform: process.platform,
    killGraceMs: 5000,
    outputLimitBytes: 1_048_576,
    wslBin: 'wsl'
  })
  // Every agent of the catalog, so that a new one is checked without a line here: its spec's binary, the shared limit
  // and its own settings at the defaults its spec declares.
  t.same(
    config.agents.map(({ spec, settings }) => [spec.agent, settings]),
    BUILT_IN_AGENTS.map(
      (spec) => [spec.agent, {
        bin: spec.defaultBin,
        maxAgents: 2,
        workerMaxAgents: 2,
        maxQueued: 100,
        extraArgs: [],
        limits: {},
        own: ownDefaults(spec),
        models: [],
        model: undefined,
        ceilings: {}
      }]
    ),
    'each agent from its own variables'
  )
})

t.test('values from the environment', async (t) => {
  const config = loadConfig({
    HOST: '0.0.0.0',
    API_TOKENS: 'a, studio:b ,,c',
    ALLOW_SHARED_AGENT_USER: 'true',
    PORT: '9000',
    AGENT_HOST_PLATFORM: 'win32',
    MAX_CLAUDE_AGENTS: '5',
    MAX_QUEUED_CLAUDE: '7',
    CLAUDE_EXTRA_ARGS: '["--model", "opus"]',
    CLAUDE_MAX_PROCESSES: '1024',
    CLAUDE_MAX_MEMORY_MB: '4096'
  })
  t.match(config, {
    host: '0.0.0.0',
    apiTokens: [
      { name: /^token-[0-9a-f]{8}$/, secret: 'a' }, { name: 'studio', secret: 'b' },
      { name: /^token-[0-9a-f]{8}$/, secret: 'c' }
    ],
    port: 9000,
    hostPlatform: 'win32'
  })
  t.match(config.agents.find(({ spec }) => spec.agent === 'claude')!.settings, {
    maxAgents: 5,
    maxQueued: 7,
    extraArgs: ['--model', 'opus'],
    limits: { processes: 1024, memoryBytes: 4096 * 1024 * 1024 }
  })
  t.same(config.agents.find(({ spec }) => spec.agent === 'crush')!.settings.limits, {}, 'another agent: the service’s')
})

t.test('API_TOKENS: named tokens, a bare secret named by its digest, no name twice, no empty secret', async (t) => {
  const [bare] = parseApiTokens(['s3cret'])
  t.equal(bare!.name, parseApiTokens(['s3cret'])[0]!.name, 'the same secret always gets the same name')
  t.notOk(bare!.name.includes('s3cret'), 'the name does not reveal the secret')
  t.same(parseApiTokens(['ci:x:y']), [{ name: 'ci', secret: 'x:y' }], 'a secret may hold colons')
  t.throws(() => parseApiTokens(['a:1', 'a:2']), /the name a is given to two tokens/)
  t.throws(() => parseApiTokens(['a:']), /the token named a has an empty secret/)
})

t.test('the slots backend', async (t) => {
  t.same(loadConfig({}).slots, { backend: 'memory' })
  t.same(loadConfig({ SLOTS_BACKEND: 'redis', REDIS_URL: 'redis://127.0.0.1:6390', SLOTS_TTL_MS: '5000' }).slots, {
    backend: 'redis', url: 'redis://127.0.0.1:6390', ttlMs: 5000, keyPrefix: 'agent-runner:', timeoutMs: 1000
  })
  t.match(
    loadConfig({ SLOTS_BACKEND: 'redis', REDIS_URL: 'redis://127.0.0.1:6390', REDIS_TIMEOUT_MS: '5000' }).slots,
    { timeoutMs: 5000 }
  )
  t.throws(() => loadConfig({ SLOTS_BACKEND: 'redis' }), /REDIS_URL is required when SLOTS_BACKEND=redis/)
  t.throws(() => loadConfig({ SLOTS_BACKEND: 'etcd' }), /SLOTS_BACKEND/)
})

t.test('the run store: sqlite alone, redis with Redis slots, or the one named', async (t) => {
  const redis = { SLOTS_BACKEND: 'redis', REDIS_URL: 'redis://127.0.0.1:6390' }
  t.equal(loadConfig({}).runsStore, 'sqlite')
  t.equal(loadConfig(redis).runsStore, 'redis')
  t.equal(loadConfig({ ...redis, RUNS_STORE: 'sqlite' }).runsStore, 'sqlite')
  t.equal(loadConfig({ RUNS_STORE: 'memory' }).runsStore, 'memory')
  t.throws(() => loadConfig({ RUNS_STORE: 'redis' }), /RUNS_STORE=redis needs SLOTS_BACKEND=redis/)
})

t.test('ROLE: api and worker meet in Redis; a worker takes at most its tool’s limit', async (t) => {
  const redis = { SLOTS_BACKEND: 'redis', REDIS_URL: 'redis://127.0.0.1:6390' }
  t.equal(loadConfig({}).role, 'all')
  t.equal(loadConfig({ ...redis, ROLE: 'worker' }).role, 'worker')
  t.equal(loadConfig({ ...redis, ROLE: 'api' }).role, 'api')
  t.throws(() => loadConfig({ ROLE: 'api' }), /ROLE=api needs SLOTS_BACKEND=redis/)
  t.throws(
    () => loadConfig({ ...redis, ROLE: 'worker', RUNS_STORE: 'sqlite' }), /ROLE=worker needs SLOTS_BACKEND=redis/
  )
  t.throws(() => loadConfig({ ...redis, ROLE: 'boss' }), /ROLE/)
  const crush = (env: Record<string, string>) =>
    loadConfig({ ...redis, ...env }).agents.find(({ spec }) => spec.agent === 'crush')!.settings.workerMaxAgents
  t.equal(crush({ MAX_CRUSH_AGENTS: '5' }), 5, 'unset: the tool’s limit')
  t.equal(crush({ MAX_CRUSH_AGENTS: '5', WORKER_MAX_CRUSH_AGENTS: '0' }), 0, '0: not taken here')
  t.equal(crush({ MAX_CRUSH_AGENTS: '5', WORKER_MAX_CRUSH_AGENTS: '9' }), 5, 'never more than the fleet’s limit')
  t.throws(() => crush({ WORKER_MAX_CRUSH_AGENTS: '-1' }), /WORKER_MAX_CRUSH_AGENTS/)
  t.equal(loadConfig({ ...redis, ROLE: 'worker', HEALTH_FILE: '/run/alive' }).healthFile, '/run/alive')
  t.equal(loadConfig({ ...redis, ROLE: 'worker' }).healthFile, undefined)
  t.throws(() => loadConfig({ HEALTH_FILE: '/run/alive' }), /HEALTH_FILE is the liveness of ROLE=api or ROLE=worker/)
})

t.test('PUBLIC_URL: an http(s) URL, its trailing slash dropped', async (t) => {
  t.equal(loadConfig({}).publicUrl, undefined)
  t.equal(loadConfig({ PUBLIC_URL: 'https://agents.example.com/runner/' }).publicUrl, 'https://agents.example.com/runner')
  t.throws(() => loadConfig({ PUBLIC_URL: 'agents.example.com' }), /PUBLIC_URL/)
})

t.test('a bad value is refused with the variable named', async (t) => {
  const bad: Array<[string, string]> = [
    ['PORT', '70000'],
    ['PORT', 'eighty'],
    ['LOG_LEVEL', 'loud'],
    ['MAX_CRUSH_AGENTS', 'two'],
    ['MAX_CRUSH_AGENTS', '0'],
    ['AGENT_HOST_PLATFORM', 'plan9'],
    ['AGENT_KILL_GRACE_MS', '-1'],
    ['AGENT_OUTPUT_LIMIT_BYTES', '10'],
    ['CLAUDE_PERMISSION_MODE', 'yolo'],
    ['CRUSH_EXTRA_ARGS', '["--quiet", 3]'],
    ['CLAUDE_EXTRA_ARGS', 'not json'],
    ['CLAUDE_EXTRA_ARGS', '--model sonnet']
  ]
  for (const [variable, value] of bad) {
    t.throws(() => loadConfig({ [variable]: value }), new RegExp(variable), `${variable}=${value}`)
  }
})

t.test('a non-loopback HOST is refused without a token, unless told to', async (t) => {
  t.throws(() => loadConfig({ HOST: '0.0.0.0' }), /HOST=0\.0\.0\.0 .*API_TOKENS.*ALLOW_UNAUTHENTICATED=true/)
  t.throws(() => loadConfig({ HOST: '::' }), /API_TOKENS/)
  t.throws(() => loadConfig({ HOST: '192.168.1.10' }), /API_TOKENS/)
  t.doesNotThrow(() => loadConfig({ HOST: '0.0.0.0', API_TOKENS: 'a-token' }))
  t.doesNotThrow(() => loadConfig({ HOST: '0.0.0.0', ALLOW_UNAUTHENTICATED: 'true' }))
  for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', '::1']) {
    t.doesNotThrow(() => loadConfig({ HOST: host }), host)
  }
})

t.test('logs: pino JSON, pretty only on a terminal', async (t) => {
  const config = loadConfig({ LOG_LEVEL: 'debug' })
  const wasTTY = process.stdout.isTTY
  t.teardown(() => {
    process.stdout.isTTY = wasTTY
  })
  process.stdout.isTTY = false
  t.same(
    loggerOptions(config), { level: 'debug', redact: ['req.headers.authorization'] },
    'JSON lines for files and collectors'
  )
  process.stdout.isTTY = true
  t.match(loggerOptions(config), { level: 'debug', transport: { target: 'pino-pretty' } }, 'pretty at a terminal')
})

t.test('API_TOKENS_FILE and REDIS_URL_FILE: secrets read from files, one source only', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-runner-secrets-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'tokens'), 'studio:s3cret,ci:other\n', { mode: 0o600 })
  writeFileSync(join(dir, 'redis'), 'redis://:pw@127.0.0.1:6390\n', { mode: 0o600 })
  const config = loadConfig({
    API_TOKENS_FILE: join(dir, 'tokens'),
    SLOTS_BACKEND: 'redis',
    REDIS_URL_FILE: join(dir, 'redis'),
    ALLOW_SHARED_AGENT_USER: 'true'
  })
  t.same(config.apiTokens, [{ name: 'studio', secret: 's3cret' }, { name: 'ci', secret: 'other' }])
  t.match(config.slots, { backend: 'redis', url: 'redis://:pw@127.0.0.1:6390' })
  t.throws(
    () => loadConfig({ API_TOKENS: 'x', API_TOKENS_FILE: join(dir, 'tokens') }),
    /API_TOKENS and API_TOKENS_FILE are both set/
  )
  t.throws(() => loadConfig({ API_TOKENS_FILE: join(dir, 'missing') }), /API_TOKENS_FILE=.*missing cannot be read/)
  const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`
  writeFileSync(join(dir, 'webhook'), `${secret}\n`, { mode: 0o600 })
  const signing = loadConfig({ WEBHOOK_SECRET_FILE: join(dir, 'webhook') })
  t.same(loadConfig({ WEBHOOK_SECRET: secret }).webhooks.secrets, signing.webhooks.secrets,
    'WEBHOOK_SECRET_FILE: the same secret as WEBHOOK_SECRET')
  t.throws(() => loadConfig({ WEBHOOK_SECRET: secret, WEBHOOK_SECRET_FILE: join(dir, 'webhook') }), /both set/)
})

t.test('a secret file every local user may read stops the start with the fix; ' +
  'one a group may read is reported', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-runner-secrets-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const tokens = join(dir, 'tokens')
  writeFileSync(tokens, 'studio:s3cret\n')
  chmodSync(tokens, 0o644)
  t.throws(() => loadConfig({ API_TOKENS_FILE: tokens }), {
    message: `${tokens} is readable by every local user, agents included (mode 644): chmod 600 ${tokens}`
  })
  chmodSync(tokens, 0o640)
  const grouped = loadConfig({ API_TOKENS_FILE: tokens })
  t.match(grouped.exposedSecretFiles, [new RegExp(`^${tokens}, readable by group \\d+ \\(mode 640\\): chmod 600`)])
  t.equal(
    whatAgentsCanReach(grouped, 'process-group').filter(
      (reach) => reach.startsWith(`a secret file's group: ${tokens}`)
    ).length,
    1, 'in /readyz and the start log'
  )
  chmodSync(tokens, 0o600)
  t.same(loadConfig({ API_TOKENS_FILE: tokens }).exposedSecretFiles, [])
  const redis = join(dir, 'redis')
  writeFileSync(redis, 'redis://:pw@127.0.0.1:6390\n', { mode: 0o604 })
  chmodSync(redis, 0o604)
  t.throws(
    () => loadConfig({ SLOTS_BACKEND: 'redis', REDIS_URL_FILE: redis }), /readable by every local user.*chmod 600/
  )
})

t.test('the .env read at start is a secret file too', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-runner-dotenv-'))
  const was = process.cwd()
  t.teardown(() => { process.chdir(was); rmSync(dir, { recursive: true, force: true }) })
  writeFileSync(join(dir, '.env'), 'API_TOKENS=studio:s3cret\n')
  chmodSync(join(dir, '.env'), 0o644)
  process.chdir(dir)
  t.throws(() => loadConfig(), /\.env is readable by every local user.*chmod 600 .*\.env$/)
  chmodSync(join(dir, '.env'), 0o600)
  t.same(loadConfig().apiTokens, [{ name: 'studio', secret: 's3cret' }])
})

t.test('a secret file AGENT_USER owns is refused, ' +
  'as the real account is looked up', { skip: process.getuid?.() !== 0 && 'AGENT_USER needs root' }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-runner-secrets-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const tokens = join(dir, 'tokens')
  writeFileSync(tokens, 'studio:s3cret\n', { mode: 0o600 })
  t.same(loadConfig({ API_TOKENS_FILE: tokens, AGENT_USER: 'nobody' }).exposedSecretFiles, [])
  chownSync(tokens, 65534, 0)
  t.throws(
    () => loadConfig({ API_TOKENS_FILE: tokens, AGENT_USER: 'nobody' }),
    /belongs to AGENT_USER, whose agents may read and change it/
  )
})

t.test('a secret file is checked against the agents’ user: its own, or its group’s, is refused', async (t) => {
  const agent = { uid: 1001, groups: [1001, 27] }
  const file = (mode: number, uid = 0, gid = 0) => ({ mode: 0o100000 | mode, uid, gid })
  t.match(secretFileProblem('/s', file(0o600, 1001), agent), { severity: 'refuse', message: /belongs to AGENT_USER/ })
  t.match(secretFileProblem('/s', file(0o640, 0, 27), agent), { severity: 'refuse', message: /group 27, AGENT_USER's/ })
  t.match(secretFileProblem('/s', file(0o640, 0, 50), agent), { severity: 'warn' })
  t.equal(secretFileProblem('/s', file(0o600), agent), null)
  t.equal(secretFileProblem('/s', file(0o400), undefined), null)
  t.match(secretFileProblem('/s', file(0o604), undefined), { severity: 'refuse' })
})

t.test('agents run in AGENT_WORKDIR by default, never in the service directory', async (t) => {
  t.equal(
    loadConfig({}).agentWorkdir, join(homedir(), 'agent-runner-workspace'),
    'under the home of whoever agents run as, out of the shared /tmp'
  )
  const workdir = join(mkdtempSync(join(tmpdir(), 'agent-runner-work-')), 'agents')
  t.teardown(() => rmSync(workdir, { recursive: true, force: true }))
  const app = await build(t, { AGENT_WORKDIR: workdir })
  t.ok(statSync(workdir).isDirectory(), 'created at start')
  t.equal(statSync(workdir).mode & 0o777, 0o700, 'for the agents alone')
  const result = await runTool(app, 'crush_run', { task: 'where am I' })
  t.equal(echoed(result).cwd, workdir)
  t.not(echoed(result).cwd, process.cwd())
})

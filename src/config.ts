import envSchema from 'env-schema'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { BUILT_IN_AGENTS } from './agents/catalog.js'
import { DEFAULT_AGENT_ENV_ALLOW, DEFAULT_AGENT_ENV_DENY, type AgentEnvRule } from './agents/environment.js'
import { agentVariables, type AgentSettings, type AgentSpec } from './agents/spec.js'
import { resolveAgentUser, type AgentUser } from './process/agent-user.js'
import { CONTAINMENT_SETTINGS, type ContainmentSetting } from './process/host-containment.js'
import { parseUidRange, type UidRange } from './process/token-users.js'
import type { RunLimits } from './process/run-cgroups.js'
import { ModelPrices, RunLimits as RunBudgetLimits } from './schemas/limits.js'
import { MODEL_PATTERN } from './schemas/run.js'
import { checkSecretFiles } from './secret-files.js'
import { parseAllowList } from './webhooks/address-policy.js'
import type { WebhookSettings } from './webhooks/policy.js'
import { parseWebhookSecrets } from './webhooks/secrets.js'
import { parseAuthor, type Author } from './workspaces/commit.js'

/** The platforms whose argv shape differs: only Windows hosts wrap the agent in wsl.exe. */
const HOST_PLATFORMS = [
  'aix', 'android', 'darwin', 'freebsd', 'haiku', 'linux', 'openbsd', 'sunos', 'win32', 'cygwin', 'netbsd'
] as const

const ExtraArgs = Type.String({
  default: '[]',
  description:
    'JSON array of strings appended to the agent options, e.g. ["--model","sonnet"]; JSON so no shell-style ' +
    'splitting is needed'
})

/** Each agent's variables, named after it: its binary, its limit, its extra options, and any of its own. */
/** A run's limits, the service's (AGENT_MAX_*) and an agent's own (<AGENT>_MAX_*). */
const MaxProcesses = Type.Integer({ minimum: 16, maximum: 1_000_000 })
const MaxMemoryMb = Type.Integer({ minimum: 64, maximum: 16_777_216 })

function agentSchemas(agents: readonly AgentSpec[]): Record<string, TSchema> {
  return Object.fromEntries(
    agents.flatMap((spec) => {
      const names = agentVariables(spec)
      return [
        [names.bin, Type.String({ default: spec.defaultBin, minLength: 1 })],
        [names.max, Type.Integer({ default: 2, minimum: 1, maximum: 1000 })],
        [names.workerMax, Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 }))],
        [names.maxQueued, Type.Integer({ default: 100, minimum: 0, maximum: 100_000 })],
        [names.extraArgs, ExtraArgs],
        [names.maxProcesses, Type.Optional(MaxProcesses)],
        [names.maxMemory, Type.Optional(MaxMemoryMb)],
        [names.models, Type.String({ default: '' })],
        [names.model, Type.Optional(Type.String({ pattern: MODEL_PATTERN }))],
        [names.maxTurns, RunBudgetLimits.properties.max_turns],
        [names.maxTokens, RunBudgetLimits.properties.max_tokens],
        [names.maxCostUsd, RunBudgetLimits.properties.max_cost_usd],
        ...Object.entries(spec.ownSettings ?? {})
      ]
    })
  )
}

/** The configuration's schema for a list of agents (the built-in ones by default). */
const envSchemaFor = (agents: readonly AgentSpec[]) =>
  Type.Object({ ...ServiceSchema.properties, ...agentSchemas(agents) })

const ServiceSchema = Type.Object({
  HOST: Type.String({ default: '127.0.0.1' }),
  API_TOKENS: Type.String({ default: '' }),
  API_TOKENS_FILE: Type.Optional(Type.String({ minLength: 1 })),
  REDIS_URL_FILE: Type.Optional(Type.String({ minLength: 1 })),
  AGENT_WORKDIR: Type.String({ default: '' }),
  AGENT_USER: Type.String({ default: '' }),
  AGENT_USERS: Type.String({ default: '' }),
  AGENT_HOME_TEMPLATE: Type.String({ default: '' }),
  ALLOW_SHARED_AGENT_USER: Type.Boolean({ default: false }),
  AGENT_LIMITS: Type.Union([Type.Literal('auto'), Type.Literal('rlimits'), Type.Literal('off')], { default: 'auto' }),
  AGENT_MAX_PROCESSES: Type.Integer({ ...MaxProcesses, default: 512 }),
  AGENT_MAX_MEMORY_MB: Type.Integer({ ...MaxMemoryMb, default: 3072 }),
  ALLOW_UNAUTHENTICATED: Type.Boolean({ default: false }),
  ALLOWED_HOSTS: Type.String({ default: '' }),
  PORT: Type.Integer({ default: 8080, minimum: 0, maximum: 65535 }),
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
    { default: 'info' }
  ),
  WSL_BIN: Type.String({ default: 'wsl', minLength: 1 }),
  AGENT_HOST_PLATFORM: Type.Optional(Type.Union(HOST_PLATFORMS.map((platform) => Type.Literal(platform)))),
  AGENT_CONTAINMENT: Type.Union(CONTAINMENT_SETTINGS.map((setting) => Type.Literal(setting)), { default: 'auto' }),
  DATA_DIR: Type.String({ default: 'data', minLength: 1 }),
  AGENT_KILL_GRACE_MS: Type.Integer({ default: 5000, minimum: 0, maximum: 600_000 }),
  AGENT_OUTPUT_LIMIT_BYTES: Type.Integer({ default: 1_048_576, minimum: 1024, maximum: 256 * 1_048_576 }),
  AGENT_ENV_ALLOW: Type.String({ default: DEFAULT_AGENT_ENV_ALLOW.join(',') }),
  AGENT_ENV_DENY: Type.String({ default: DEFAULT_AGENT_ENV_DENY.join(',') }),
  SLOTS_BACKEND: Type.Union([Type.Literal('memory'), Type.Literal('redis')], { default: 'memory' }),
  ROLE: Type.Union([Type.Literal('all'), Type.Literal('api'), Type.Literal('worker')], { default: 'all' }),
  HEALTH_FILE: Type.Optional(Type.String({ minLength: 1 })),
  REDIS_URL: Type.String({ default: '' }),
  SLOTS_TTL_MS: Type.Integer({ default: 30_000, minimum: 300, maximum: 3_600_000 }),
  SLOTS_KEY_PREFIX: Type.String({ default: 'agent-runner:' }),
  REDIS_TIMEOUT_MS: Type.Integer({ default: 1000, minimum: 100, maximum: 60_000 }),
  PUBLIC_URL: Type.String({ default: '', pattern: '^(https?://[^\\s/]+(/\\S*)?)?$' }),
  REQUEST_TIMEOUT_MS: Type.Integer({ default: 30_000, minimum: 100, maximum: 600_000 }),
  MAX_CONNECTIONS: Type.Integer({ default: 1024, minimum: 1, maximum: 1_000_000 }),
  STREAM_HEARTBEAT_MS: Type.Integer({ default: 15_000, minimum: 10, maximum: 600_000 }),
  RUNS_RETENTION_MS: Type.Integer({ default: 3_600_000, minimum: 1, maximum: 7 * 86_400_000 }),
  SESSIONS_RETENTION_MS: Type.Integer({ default: 7 * 86_400_000, minimum: 1, maximum: 90 * 86_400_000 }),
  SESSIONS_MAX_PER_OWNER: Type.Integer({ default: 1000, minimum: 1, maximum: 1_000_000 }),
  RUNS_MAX_FINISHED: Type.Integer({ default: 100, minimum: 1, maximum: 100_000 }),
  RUNS_STORE: Type.Union(
    [Type.Literal('auto'), Type.Literal('sqlite'), Type.Literal('memory'), Type.Literal('redis')],
    { default: 'auto' }
  ),
  SUDO_PROBE_TTL_MS: Type.Integer({ default: 300_000, minimum: 1, maximum: 86_400_000 }),
  WEBHOOK_SECRET: Type.String({ default: '' }),
  WEBHOOK_SECRETS: Type.String({ default: '' }),
  WEBHOOK_SECRET_FILE: Type.Optional(Type.String({ minLength: 1 })),
  WEBHOOK_SECRETS_FILE: Type.Optional(Type.String({ minLength: 1 })),
  WEBHOOK_ALLOW_HOSTS: Type.String({ default: '' }),
  WEBHOOK_RETRY_BASE_MS: Type.Integer({ default: 5000, minimum: 10, maximum: 3_600_000 }),
  WEBHOOK_RETRY_FOR_MS: Type.Integer({ default: 86_400_000, minimum: 1000, maximum: 7 * 86_400_000 }),
  WORKTREES_DIR: Type.String({ default: '' }),
  WORKSPACE_DIFF_LIMIT_BYTES: Type.Integer({ default: 262_144, minimum: 1024, maximum: 64 * 1_048_576 }),
  WORKSPACE_COMMIT_AUTHOR: Type.String({ default: 'agent-runner <agent-runner@localhost>' }),
  MODEL_PRICES_FILE: Type.Optional(Type.String({ minLength: 1 })),
  TOKEN_DAILY_COST_USD: Type.String({ default: '' }),
})

export const EnvSchema = envSchemaFor(BUILT_IN_AGENTS)

type RawEnv = Static<typeof ServiceSchema> & Record<string, unknown>

export interface Config {
  host: string
  /**
   * Bearer tokens accepted on /tools and /runs, each with the name logs and run ownership use; empty: no
   * authentication.
   */
  apiTokens: ApiToken[]
  /** Without tokens: the Host and Origin names served besides loopback's and HOST's; `*` for any. */
  allowedHosts: string[]
  port: number
  /** Where callers reach the service (behind a proxy): the served OpenAPI document's server. */
  publicUrl: string | undefined
  logLevel: string
  hostPlatform: NodeJS.Platform
  /** How agents on this host are contained: the strongest mode available, or one named. */
  containment: ContainmentSetting
  /** Where the service keeps what must outlive it (the records of running agents). */
  dataDir: string
  /** Where agents run when a request names no cwd: never the service's own directory, next to its .env. */
  agentWorkdir: string
  /** Who agents run as, when the service runs as root and should not lend them its identity (AGENT_USER). */
  agentUser: AgentUser | undefined
  /** Each run's own cgroup, where the host gives one (root, Linux): its processes (threads count) and memory. */
  runLimits: RunLimits | undefined
  /** AGENT_USERS: each token's agents as a uid of its own from this range, in a home of its own. */
  agentUsers: { range: UidRange; template: string | undefined } | undefined
  killGraceMs: number
  outputLimitBytes: number
  sudoProbeTtlMs: number
  heartbeatMs: number
  /** How long a request (headers and body) may take to arrive; the run that follows is not bounded by it. */
  requestTimeoutMs: number
  maxConnections: number
  slots:
    | { backend: 'memory' }
    | { backend: 'redis'; url: string; ttlMs: number; keyPrefix: string; timeoutMs: number }
  /**
   * all: serves the API and runs what it is asked; api: hands async runs to the fleet's workers; worker: no HTTP, runs
   * what the API replicas hand over.
   */
  role: 'all' | 'api' | 'worker'
  /** ROLE=api or worker: a file rewritten while the fleet's Redis takes this process's renewals (its liveness). */
  healthFile: string | undefined
  runsRetentionMs: number
  /** How long a session a run reported may be continued after its last run. */
  sessionsRetentionMs: number
  /** How many sessions one token keeps: past it, its least recently continued go. */
  sessionsMaxPerOwner: number
  runsMaxFinished: number
  /** Where async runs are kept: an SQLite file under dataDir, this process's memory, or the fleet's Redis. */
  runsStore: 'sqlite' | 'memory' | 'redis'
  agentEnvRule: AgentEnvRule
  /**
   * Files holding secrets (API_TOKENS_FILE, REDIS_URL_FILE, WEBHOOK_SECRETS_FILE, the .env read at start): files an
   * agent of the same user could read too.
   */
  secretFiles: string[]
  /** Those a group may read (none an agent is known to: the service refuses to start on those). */
  exposedSecretFiles: string[]
  wslBin: string
  /** Who signs each token's webhooks, what they may reach besides public addresses, how long they are retried. */
  webhooks: WebhookSettings
  /** Worktree runs: where their worktrees go, how much of a diff a result carries, who commits. */
  workspaces: { worktreesDir: string; diffLimitBytes: number; author: Author }
  /** What models cost (MODEL_PRICES_FILE): runs' cost where their CLI says none, and their cost limits. */
  modelPrices: ModelPrices
  /** TOKEN_DAILY_COST_USD: dollars each named token's runs may cost over any 24 hours. */
  dailyCostUsd: Record<string, number>
  /** The agents to run, each with its settings. */
  agents: Array<{ spec: AgentSpec; settings: AgentSettings }>
}

/**
 * Reads the configuration once at start. A bad value throws an Error naming the variable, so the server stops before it
 * listens. Without an explicit source, `.env` (if present) is merged under the real environment.
 */
export function loadConfig(
  source?: Record<string, string | undefined>,
  agents: readonly AgentSpec[] = BUILT_IN_AGENTS
): Config {
  const env = envSchema<RawEnv>({
    schema: envSchemaFor(agents),
    ...(source === undefined ? { dotenv: { quiet: true } } : { env: false, data: source })
  })
  const agentUser = env.AGENT_USER === '' ? undefined : resolveAgentUser(env.AGENT_USER)
  const dotenvFile = resolve('.env')
  const secretFiles = [
    env.API_TOKENS_FILE, env.REDIS_URL_FILE, env.WEBHOOK_SECRET_FILE, env.WEBHOOK_SECRETS_FILE,
    source === undefined && existsSync(dotenvFile) ? dotenvFile : undefined
  ].filter((file) => file !== undefined)
  // Out of the shared temporary directory, where any local user could make it first.
  const config: Config = {
    host: env.HOST,
    apiTokens: parseApiTokens(splitList(secretValue(env, 'API_TOKENS'))),
    allowedHosts: splitList(env.ALLOWED_HOSTS),
    port: env.PORT,
    publicUrl: env.PUBLIC_URL === '' ? undefined : env.PUBLIC_URL.replace(/\/+$/, ''),
    logLevel: env.LOG_LEVEL,
    hostPlatform: env.AGENT_HOST_PLATFORM ?? process.platform,
    containment: env.AGENT_CONTAINMENT,
    dataDir: env.DATA_DIR,
    agentWorkdir: env.AGENT_WORKDIR === ''
      ? join(agentUser?.home ?? homedir(), 'agent-runner-workspace')
      : env.AGENT_WORKDIR,
    agentUser,
    agentUsers: tokenUsersConfig(env, agentUser),
    runLimits: env.AGENT_LIMITS === 'off'
      ? undefined
      : {
          processes: env.AGENT_MAX_PROCESSES,
          memoryBytes: env.AGENT_MAX_MEMORY_MB * 1024 * 1024,
          cgroups: env.AGENT_LIMITS === 'auto'
        },
    killGraceMs: env.AGENT_KILL_GRACE_MS,
    outputLimitBytes: env.AGENT_OUTPUT_LIMIT_BYTES,
    sudoProbeTtlMs: env.SUDO_PROBE_TTL_MS,
    heartbeatMs: env.STREAM_HEARTBEAT_MS,
    requestTimeoutMs: env.REQUEST_TIMEOUT_MS,
    maxConnections: env.MAX_CONNECTIONS,
    slots: slotsConfig(env),
    role: roleOf(env),
    healthFile: healthFileOf(env),
    runsRetentionMs: env.RUNS_RETENTION_MS,
    sessionsRetentionMs: env.SESSIONS_RETENTION_MS,
    sessionsMaxPerOwner: env.SESSIONS_MAX_PER_OWNER,
    runsMaxFinished: env.RUNS_MAX_FINISHED,
    runsStore: runsStore(env),
    agentEnvRule: { allow: splitList(env.AGENT_ENV_ALLOW), deny: splitList(env.AGENT_ENV_DENY) },
    wslBin: env.WSL_BIN,
    webhooks: {
      secrets: parseWebhookSecrets(secretValue(env, 'WEBHOOK_SECRET'), splitList(secretValue(env, 'WEBHOOK_SECRETS'))),
      allow: parseAllowList(splitList(env.WEBHOOK_ALLOW_HOSTS)),
      retryBaseMs: env.WEBHOOK_RETRY_BASE_MS,
      retryForMs: env.WEBHOOK_RETRY_FOR_MS
    },
    workspaces: {
      worktreesDir: resolve(env.WORKTREES_DIR === '' ? join(env.DATA_DIR, 'worktrees') : env.WORKTREES_DIR),
      diffLimitBytes: env.WORKSPACE_DIFF_LIMIT_BYTES,
      author: commitAuthor(env.WORKSPACE_COMMIT_AUTHOR)
    },
    modelPrices: env.MODEL_PRICES_FILE === undefined ? {} : readModelPrices(env.MODEL_PRICES_FILE),
    dailyCostUsd: {},
    secretFiles,
    exposedSecretFiles: checkSecretFiles(secretFiles, agentUser).exposed,
    agents: agents.map((spec) => ({ spec, settings: agentSettings(spec, env) }))
  }
  config.dailyCostUsd = parseDailyCosts(splitList(env.TOKEN_DAILY_COST_USD), config.apiTokens)
  assertSafeExposure(config, env.ALLOW_UNAUTHENTICATED)
  assertSeparateTokens(config, env.ALLOW_SHARED_AGENT_USER)
  return config
}

/**
 * TOKEN_DAILY_COST_USD: `name:dollars` entries, each a token API_TOKENS names (`anonymous` without tokens), in a
 * Map-free record: a name like `__proto__` is refused by the token names' own pattern.
 */
function parseDailyCosts(entries: string[], tokens: ApiToken[]): Record<string, number> {
  const names = tokens.length === 0 ? ['anonymous'] : tokens.map((token) => token.name)
  const costs: Record<string, number> = {}
  for (const entry of entries) {
    const separator = entry.lastIndexOf(':')
    const name = entry.slice(0, Math.max(0, separator))
    const dollars = Number(entry.slice(separator + 1))
    if (!names.includes(name)) {
      throw new Error(`TOKEN_DAILY_COST_USD: ${JSON.stringify(name)} is no token's name (${names.join(', ')})`)
    }
    if (!(Number.isFinite(dollars) && dollars > 0) || entry.slice(separator + 1).trim() === '') {
      throw new Error(`TOKEN_DAILY_COST_USD: ${name}'s ceiling must be dollars above 0: ${entry.slice(separator + 1)}`)
    }
    costs[name] = dollars
  }
  return costs
}

/** MODEL_PRICES_FILE: JSON, `{"<model>": {"input_usd_per_mtok": 3, "output_usd_per_mtok": 15}, …}`. */
function readModelPrices(file: string): ModelPrices {
  let prices: unknown
  try {
    prices = JSON.parse(readFileSync(file, 'utf8'))
  } catch (error) {
    throw new Error(`MODEL_PRICES_FILE=${file} cannot be read as JSON: ${(error as Error).message}`)
  }
  const wrong = Value.Errors(ModelPrices, prices).First()
  if (wrong !== undefined) {
    throw new Error(
      `MODEL_PRICES_FILE=${file}: ${wrong.path || '/'} ${wrong.message} ` +
      '(each model: {"input_usd_per_mtok": <dollars>, "output_usd_per_mtok": <dollars>})'
    )
  }
  return prices as ModelPrices
}

function commitAuthor(value: string): Author {
  try {
    return parseAuthor(value)
  } catch (error) {
    throw new Error(`WORKSPACE_COMMIT_AUTHOR: ${(error as Error).message}`)
  }
}

/** AGENT_USERS, which needs a service that can switch users (root, on Linux) and replaces AGENT_USER. */
function tokenUsersConfig(env: RawEnv, agentUser: AgentUser | undefined): Config['agentUsers'] {
  if (env.AGENT_USERS === '') {
    if (env.AGENT_HOME_TEMPLATE !== '') {
      throw new Error('AGENT_HOME_TEMPLATE is laid into the homes of AGENT_USERS: set it')
    }
    return undefined
  }
  if (agentUser !== undefined) throw new Error('AGENT_USER and AGENT_USERS are both set: keep one')
  if (process.platform !== 'linux') throw new Error(`AGENT_USERS works on Linux hosts; this is ${process.platform}`)
  if (process.getuid!() !== 0) throw new Error('AGENT_USERS needs the service to run as root, to start agents as them')
  const template = env.AGENT_HOME_TEMPLATE === '' ? undefined : resolve(env.AGENT_HOME_TEMPLATE)
  if (template !== undefined && !existsSync(template)) throw new Error(`AGENT_HOME_TEMPLATE=${template} does not exist`)
  return { range: parseUidRange(env.AGENT_USERS), template }
}

/**
 * Several tokens whose agents are one user share that user's files and processes: each token's agents could read the
 * others' runs and conversations. Only with AGENT_USERS, or when the operator says so.
 */
function assertSeparateTokens(config: Config, allowShared: boolean): void {
  if (config.apiTokens.length < 2 || config.agentUsers !== undefined || allowShared) return
  throw new Error(
    `${String(config.apiTokens.length)} tokens, and their agents would all run as one user, each reaching the ` +
      'others\' runs and conversations: set AGENT_USERS (a uid range, the service as root) to give each token a user ' +
      'of its own, or ALLOW_SHARED_AGENT_USER=true if they trust each other'
  )
}

/**
 * A secret given directly, or as `<NAME>_FILE`, the path of a file holding it (Docker and Kubernetes secrets): then it
 * is in no environment an agent or a crash report could show, nor in the service's own /proc/<pid>/environ, which
 * every process of its uid may read and which no later change to process.env rewrites. One of the two, not both.
 */
function secretValue(env: RawEnv, name: 'API_TOKENS' | 'REDIS_URL' | 'WEBHOOK_SECRET' | 'WEBHOOK_SECRETS'): string {
  const file = env[`${name}_FILE`]
  if (file === undefined) return env[name]
  if (env[name] !== '') throw new Error(`${name} and ${name}_FILE are both set: keep one`)
  try {
    return readFileSync(file, 'utf8').trim()
  } catch (error) {
    throw new Error(`${name}_FILE=${file} cannot be read: ${(error as Error).message}`)
  }
}

function slotsConfig(env: RawEnv): Config['slots'] {
  if (env.SLOTS_BACKEND === 'memory') return { backend: 'memory' }
  const url = secretValue(env, 'REDIS_URL')
  if (url === '') throw new Error('REDIS_URL is required when SLOTS_BACKEND=redis (e.g. redis://127.0.0.1:6379)')
  const { SLOTS_TTL_MS: ttlMs, SLOTS_KEY_PREFIX: keyPrefix, REDIS_TIMEOUT_MS: timeoutMs } = env
  return { backend: 'redis', url, ttlMs, keyPrefix, timeoutMs }
}

function agentSettings(spec: AgentSpec, env: RawEnv): AgentSettings {
  const names = agentVariables(spec)
  return {
    bin: env[names.bin] as string,
    maxAgents: env[names.max] as number,
    workerMaxAgents: Math.min((env[names.workerMax] as number | undefined) ?? Infinity, env[names.max] as number),
    maxQueued: env[names.maxQueued] as number,
    extraArgs: parseExtraArgs(names.extraArgs, env[names.extraArgs] as string),
    limits: {
      ...(env[names.maxProcesses] === undefined ? {} : { processes: env[names.maxProcesses] as number }),
      ...(env[names.maxMemory] === undefined ? {} : { memoryBytes: (env[names.maxMemory] as number) * 1024 * 1024 })
    },
    own: Object.fromEntries(Object.keys(spec.ownSettings ?? {}).map((name) => [name, String(env[name])])),
    ...modelSettings(names, env),
    ceilings: ceilingsOf(spec, names, env)
  }
}

/** <AGENT>_MAX_TURNS, _MAX_TOKENS, _MAX_COST_USD: refused for an agent whose runs say nothing they could be held to. */
function ceilingsOf(
  spec: AgentSpec, names: ReturnType<typeof agentVariables>, env: RawEnv
): AgentSettings['ceilings'] {
  const ceilings = {
    max_turns: env[names.maxTurns] as number | undefined,
    max_tokens: env[names.maxTokens] as number | undefined,
    max_cost_usd: env[names.maxCostUsd] as number | undefined
  }
  const set = Object.entries(ceilings).filter(([, value]) => value !== undefined)
  if (set.length > 0 && (spec.steps === undefined || spec.steps().readsText === true)) {
    const [name] = set[0]!
    const variable = { max_turns: names.maxTurns, max_tokens: names.maxTokens, max_cost_usd: names.maxCostUsd }
    throw new Error(
      `${variable[name as keyof typeof variable]}: ${spec.agent} prints plain text, no turns, tokens nor cost: ` +
      'nothing could hold its runs to it'
    )
  }
  return Object.fromEntries(set)
}

/**
 * <AGENT>_MODELS and <AGENT>_MODEL: each a model RunParams would take (they reach the argv the same way), and a default
 * the list allows, or no run that names none could start as the operator meant.
 */
function modelSettings(names: { models: string; model: string }, env: RawEnv): Pick<AgentSettings, 'models' | 'model'> {
  const models = splitList(env[names.models] as string)
  const unfit = models.find((model) => !new RegExp(MODEL_PATTERN).test(model))
  if (unfit !== undefined) {
    throw new Error(`${names.models}: ${JSON.stringify(unfit)} is no model name (${MODEL_PATTERN})`)
  }
  const model = env[names.model] as string | undefined
  if (model !== undefined && models.length > 0 && !models.includes(model)) {
    throw new Error(
      `${names.model}=${model} is not in ${names.models} (${models.join(', ')}): add it, or pick one of them`
    )
  }
  return { models, model }
}

/** A fleet's API replicas and workers meet in Redis: its slots, its queues, its runs. */
function roleOf(env: RawEnv): Config['role'] {
  if (env.ROLE !== 'all' && (env.SLOTS_BACKEND !== 'redis' || runsStore(env) !== 'redis')) {
    throw new Error(
      `ROLE=${env.ROLE} needs SLOTS_BACKEND=redis (and RUNS_STORE auto or redis): the fleet meets in Redis`
    )
  }
  return env.ROLE
}

/** Only a fleet's member renews anything: elsewhere the file would never change, and a probe reading it would fail. */
function healthFileOf(env: RawEnv): string | undefined {
  if (env.HEALTH_FILE !== undefined && env.ROLE === 'all') {
    throw new Error('HEALTH_FILE is the liveness of ROLE=api or ROLE=worker; ROLE=all answers GET /healthz')
  }
  return env.HEALTH_FILE
}

/** A fleet (slots in Redis) keeps its runs there too, so that any replica answers for any run. */
function runsStore(env: RawEnv): Config['runsStore'] {
  const store = env.RUNS_STORE === 'auto' ? (env.SLOTS_BACKEND === 'redis' ? 'redis' : 'sqlite') : env.RUNS_STORE
  if (store === 'redis' && env.SLOTS_BACKEND !== 'redis') {
    throw new Error('RUNS_STORE=redis needs SLOTS_BACKEND=redis and its REDIS_URL')
  }
  return store
}

export interface ApiToken {
  name: string
  secret: string
}

/**
 * `name:secret` entries, or a bare secret named after a short digest of it: a name logs and metrics can carry, and
 * that says which caller ran what, without the secret itself.
 */
export function parseApiTokens(entries: string[]): ApiToken[] {
  const tokens = entries.map((entry) => {
    const separator = entry.indexOf(':')
    if (separator > 0 && /^[A-Za-z0-9._-]+$/.test(entry.slice(0, separator))) {
      return { name: entry.slice(0, separator), secret: entry.slice(separator + 1) }
    }
    return { name: `token-${createHash('sha256').update(entry).digest('hex').slice(0, 8)}`, secret: entry }
  })
  for (const token of tokens) {
    if (token.secret === '') throw new Error(`API_TOKENS: the token named ${token.name} has an empty secret`)
  }
  const names = tokens.map((token) => token.name)
  // Without tokens every caller is `anonymous`: a token by that name would own their runs, and they its.
  if (names.includes('anonymous')) {
    throw new Error('API_TOKENS: the name anonymous is reserved for callers without a token')
  }
  const repeated = names.find((name, index) => names.indexOf(name) !== index)
  if (repeated !== undefined) throw new Error(`API_TOKENS: the name ${repeated} is given to two tokens`)
  return tokens
}

const splitList = (raw: string): string[] => raw.split(',').map((item) => item.trim()).filter((item) => item !== '')

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127(\.\d{1,3}){3}$/.test(host)
}

/**
 * Whoever reaches the service can make an agent edit files and run commands: listening beyond loopback without a
 * token has to be asked for by name.
 */
function assertSafeExposure(config: Config, allowUnauthenticated: boolean): void {
  if (isLoopback(config.host) || config.apiTokens.length > 0 || allowUnauthenticated) return
  throw new Error(
    `HOST=${config.host} is reachable from other machines and API_TOKENS is empty: anyone who can connect could run ` +
      'agents that edit files and execute commands. Set API_TOKENS, or ALLOW_UNAUTHENTICATED=true if something in ' +
      'front of the service authenticates callers.'
  )
}

function parseExtraArgs(variable: string, raw: string): string[] {
  let parsed: unknown
  try {
    parsed = JSON.parse(raw)
  } catch {
    // reported below with the same message as a well-formed value of the wrong type
  }
  if (!Array.isArray(parsed) || !parsed.every((item) => typeof item === 'string')) {
    throw new Error(
      `${variable} must be a JSON array of strings, e.g. ["--model","sonnet"]; got ${JSON.stringify(raw)}`
    )
  }
  return parsed
}

import Fastify, { type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { randomUUID } from 'node:crypto'
import { closeConnectionsWhenIdle } from './connections.js'
import { defineTools } from '../agents/tools.js'
import { buildAgentEnv } from '../agents/environment.js'
import type { Config } from '../config.js'
import { serviceError } from '../errors.js'
import { answerClientError, formatValidationError, registerErrorHandlers, toErrorResponse } from './error-handler.js'
import { ANONYMOUS, requireBearerToken } from './auth.js'
import { sharedSchemaCompilers } from './schema-compilers.js'
import { allowedHostNames, requireKnownHost } from './host-check.js'
import healthRoutes from './routes/health.js'
import { Metrics } from '../metrics.js'
import type { ContainmentMode, AgentReadiness } from '../schemas/health.js'
import { chooseHostContainment, whatEscapes } from '../process/host-containment.js'
import { agentReadiness } from '../agents/readiness.js'
import { RunLedger } from '../process/ledger.js'
import { prepareWorkdir } from '../process/workdir.js'
import { claimDataDir } from '../data-dir.js'
import { whatAgentsCanReach } from '../isolation.js'
import { isEarlierLife, killMarked, serviceLife } from '../process/run-marks.js'
import { WslDistros } from '../process/wsl-distros.js'
import { registerOpenApi } from './openapi.js'
import { consoleRoutes } from './console.js'
import toolRoutes from './routes/tools.js'
import { RunLauncher } from '../runs/launcher.js'
import { RunRegistry } from '../runs/registry.js'
import { createRunStore } from '../runs/stores/index.js'
import runRoutes from './routes/runs.js'
import mcpRoute from './mcp/route.js'
import { version } from '../version.js'
import { sharedSchemas } from '../schemas/shared.js'
import { createSlotLimiter } from '../slots/index.js'
import type { SlotLimiter } from '../slots/limiter.js'
import { SudoProbe } from '../sudo/probe.js'
import { SudoShim } from '../sudo/shim.js'
import { TokenUsers } from '../process/token-users.js'
import { confined } from '../process/confined.js'
import { hostCgroups, removeCgroups } from '../process/run-cgroups.js'
import { withoutCgroups } from '../process/rlimits.js'

/**
 * A JSON body of the largest accepted task: 30,000 characters, each at most a 12-byte surrogate pair escaped as
 * `\uXXXX\uXXXX` (an emoji), plus the other fields.
 */
const BODY_LIMIT_BYTES = 512 * 1024

/** A caller's x-request-id is kept when it is a plain token of reasonable size; anything else gets a fresh id. */
const REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/

/**
 * How often a running async run's new events reach the store: what a crash may lose, and how far other replicas
 * lag.
 */
const RUN_SAVE_EVERY_MS = 200

export interface AppOptions {
  /** Overrides the logger built from config (tests pass false or a stream). */
  logger?: FastifyServerOptions['logger']
  /** Environment the agents inherit. */
  agentEnv?: NodeJS.ProcessEnv
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The startup log's limits, and tests' view of what is held. */
    slots: SlotLimiter
    /** Each agent as found, for /readyz and the startup log. */
    readiness: () => Promise<AgentReadiness[]>
    containment: { mode: ContainmentMode; reason: string; escapes: string; limits: string }
  }
}

export function loggerOptions(config: Config): FastifyServerOptions['logger'] {
  const base = { level: config.logLevel, redact: ['req.headers.authorization'] }
  // Pretty lines are for people at a terminal; anything else (files, collectors) gets pino's JSON.
  return process.stdout.isTTY ? { ...base, transport: { target: 'pino-pretty' } } : base
}

/** AGENT_USERS: every token's user allocated at start (a range too small stops it here), anonymous callers' too. */
function tokenUsers(config: Config, dataDir: string): TokenUsers | undefined {
  if (config.agentUsers === undefined) return undefined
  const users = new TokenUsers({ ...config.agentUsers, dataDir })
  users.allocate(config.apiTokens.length === 0 ? [ANONYMOUS] : config.apiTokens.map((token) => token.name))
  return users
}

export async function buildApp(config: Config, options: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger ?? loggerOptions(config),
    bodyLimit: BODY_LIMIT_BYTES,
    requestIdHeader: false,
    genReqId: (request) => {
      const given = request.headers['x-request-id']
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
    },
    // A run may last 30 minutes: no idle timer may cut a quiet response short. Receiving the request is bounded,
    // though (Node's requestTimeout ends once the body is in): a client trickling its headers or body holds nothing
    // for long. Node checks every connectionsCheckingInterval, 30 s by default: far coarser than the bound.
    connectionTimeout: 0,
    schemaController: { compilersFactory: sharedSchemaCompilers() },
    // Fastify's own 503 while closing has no `code`: the onRequest hook below answers SHUTTING_DOWN instead.
    return503OnClosing: false,
    requestTimeout: config.requestTimeoutMs,
    http: {
      headersTimeout: Math.min(10_000, config.requestTimeoutMs),
      connectionsCheckingInterval: Math.min(1000, config.requestTimeoutMs)
    },
    clientErrorHandler: answerClientError,
    // The router's own refusals (a URL that cannot be decoded, a parameter over 100 characters), in the shared shape.
    frameworkErrors: (error, _request, reply: FastifyReply) => {
      const body = toErrorResponse(error)
      void reply.code(body.statusCode).send(body)
    },
    forceCloseConnections: 'idle',
    schemaErrorFormatter: formatValidationError,
    ajv: {
      // Unknown fields are an error, not something to drop silently; and a string is not a number.
      customOptions: { removeAdditional: false, coerceTypes: false }
    }
  }).withTypeProvider<TypeBoxTypeProvider>()

  app.server.maxConnections = config.maxConnections

  // Fastify also parses text/plain by default; this API speaks JSON only, so anything else is a 415.
  app.removeContentTypeParser('text/plain')

  // The parts of the service, built once: what runs agents, what counts them, and who may stop them.
  const serviceEnv = options.agentEnv ?? process.env
  const tools = defineTools(
    { agents: config.agents, agentEnvRule: config.agentEnvRule, agentUserUid: config.agentUser?.uid },
    serviceEnv
  )
  const slots = await createSlotLimiter(config, app.log)
  const toolNames = Object.keys(tools)
  const metrics = new Metrics(toolNames, slots)
  // What the service's own helpers (sudo probe, wsl --list, leftover stops) inherit: the common variables only.
  const agentEnv = buildAgentEnv(serviceEnv, config.agentEnvRule)
  const sudoProbe = new SudoProbe(config.sudoProbeTtlMs, agentEnv)
  // Windows has no sudo of its own; WSL runs meet the distro's.
  const sudoShim = process.platform === 'win32' ? undefined : SudoShim.install()
  app.addHook('onClose', () => { sudoShim?.remove() })
  // Before anything in DATA_DIR is acted on (the ledger's leftovers, the store's lost runs): this service's alone.
  // Each token's home is under DATA_DIR: its user crosses DATA_DIR (never lists it: every file there is 0600).
  const dataDir = await claimDataDir(config.dataDir, config.agentUsers !== undefined)
  app.addHook('onClose', () => { dataDir.release() })
  if (dataDir.repaired !== null) app.log.warn(dataDir.repaired)
  const replica = randomUUID()
  const life = serviceLife(dataDir.dir, replica)
  const host = await chooseHostContainment(config.containment, undefined, life)
  app.log.info({ containment: host.containment.mode, reason: host.reason }, `containment: ${host.containment.mode}`)
  const ledger = new RunLedger(config.dataDir)
  // Agents' default directory: theirs alone, not the service's (its .env, its data).
  prepareWorkdir(config.agentWorkdir, config.agentUser)
  // Before anything runs: what a previous life of the service left running (it was killed) is stopped now.
  const leftovers = await ledger.stopLeftovers({ env: agentEnv, life, wslBin: config.wslBin })
  if (leftovers.length > 0) {
    app.log.warn({ leftovers }, `stopped what ${leftovers.length} run(s) of a previous life left running`)
  }
  // What escaped the ledger (a process that left its run's group) still carries its run's mark.
  const marked = await killMarked(isEarlierLife(life))
  if (marked > 0) app.log.warn({ processes: marked }, `stopped ${marked} process(es) a previous life's runs left`)
  // Each run in a cgroup of its own where the host gives one; what a killed life left in them (beyond what its ledger
  // and marks found above) is ended now.
  const cgroups = await hostCgroups(life.service, config.runLimits)
  const bounded = 'layout' in cgroups
    ? { containment: confined(host.containment, cgroups.layout, config.runLimits!), limits: cgroups.limits }
    : await withoutCgroups(host.containment, {
      processes: config.runLimits?.processes,
      tokenUsers: config.agentUsers !== undefined,
      path: process.env['PATH'] ?? '',
      noCgroups: cgroups.reason
    })
  const { limits, containment: hostContainment } = bounded
  app.log.info(`limits: ${limits}`)
  if ('layout' in cgroups) {
    const left = cgroups.leftovers
    if (left > 0) app.log.warn(`stopped ${String(left)} process(es) a previous life's runs left in their cgroups`)
    app.addHook('onClose', () => { removeCgroups(cgroups.layout) })
  }
  const store = await createRunStore(config, replica, app.log)
  const lost = await store.recover()
  if (lost.length > 0) app.log.warn({ runs: lost }, `${lost.length} run(s) of a previous life ended with it: now lost`)
  const { hostPlatform, wslBin, agentWorkdir, agentUser, killGraceMs, outputLimitBytes } = config
  const launcher = new RunLauncher({
    settings: { hostPlatform, wslBin, agentWorkdir, agentUser, killGraceMs, outputLimitBytes },
    tools,
    slots,
    sudoProbe,
    sudoShim,
    hostContainment,
    ledger,
    wslDistros: new WslDistros(config.wslBin, agentEnv),
    sessions: store,
    tokenUsers: tokenUsers(config, dataDir.dir)
  })
  const registry = new RunRegistry({
    launcher,
    metrics,
    replica,
    store,
    outputLimitBytes: config.outputLimitBytes,
    saveEveryMs: RUN_SAVE_EVERY_MS,
    remoteStopWaitMs: 3 * config.killGraceMs + 5000
  })
  app.decorate('slots', slots)

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id)
  })
  // Before the server stops accepting, stop every agent so their requests answer with what the agents did.
  let closing = false
  app.addHook('onRequest', async () => {
    if (closing) throw serviceError('SHUTTING_DOWN')
  })
  app.addHook('preClose', async () => {
    closing = true
    await registry.shutdown()
  })
  app.addHook('onClose', async () => {
    await slots.close()
    await store.close()
  })
  closeConnectionsWhenIdle(app)

  registerErrorHandlers(app, (tool, code) => metrics.observeRejection(tool, code))
  // Without tokens, every route answers this machine's names only: health, metrics and the documents tell a
  // rebinding page about the service as much as the runs do.
  if (config.apiTokens.length === 0) requireKnownHost(app, allowedHostNames(config.host, config.allowedHosts))
  for (const schema of sharedSchemas(toolNames)) app.addSchema(schema)
  await registerOpenApi(app, Object.values(tools).map((tool) => tool.spec.agent), config.publicUrl)
  // The page needs no token to load (it asks for one).
  await app.register(consoleRoutes)
  await app.register(async (authenticated) => {
    await requireBearerToken(authenticated, config.apiTokens)
    await authenticated.register(toolRoutes, { heartbeatMs: config.heartbeatMs, tools, slots, runs: registry })
    await authenticated.register(runRoutes, { runs: registry, toolNames, heartbeatMs: config.heartbeatMs })
    await authenticated.register(mcpRoute, {
      tools,
      runs: registry,
      version,
      onRejection: (tool, code) => metrics.observeRejection(tool, code)
    })
  })
  const probes = new AbortController()
  app.addHook('onClose', () => { probes.abort() })
  const readiness = agentReadiness(Object.values(tools), {
    signal: probes.signal, bind: host.bindToService, user: config.agentUser
  })
  app.decorate('readiness', readiness)
  app.decorate('containment', {
    mode: host.containment.mode,
    reason: host.reason,
    escapes: whatEscapes(host.containment.mode, process.platform, config.agentUsers !== undefined, 'layout' in cgroups),
    limits
  })
  const containment = app.containment
  const isolation = { agents_can_reach: whatAgentsCanReach(config, host.containment.mode) }
  for (const reach of isolation.agents_can_reach) app.log.warn(`agents can reach ${reach}`)
  await app.register(healthRoutes, { tokens: config.apiTokens, readiness, metrics, slots, containment, isolation })
  return app
}

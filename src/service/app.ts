import type { FastifyBaseLogger, FastifyInstance, FastifyServerOptions } from 'fastify'
import { agentReadiness } from '../agents/readiness.js'
import { buildAgentEnv } from '../agents/environment.js'
import { toolNameOf } from '../agents/spec.js'
import { defineTools } from '../agents/tools.js'
import type { Config } from '../config.js'
import type { FleetOptions, RunPlace } from '../fleet/run-jobs.js'
import { callerNames } from '../http/auth.js'
import { createServer, routesPlugin } from '../http/app.js'
import { whatAgentsCanReach } from '../isolation.js'
import { Metrics } from '../metrics.js'
import { whatEscapes } from '../process/host-containment.js'
import type { AgentReadiness, ContainmentMode } from '../schemas/health.js'
import { platformPlugin } from './platform.js'
import { joinFleet, runQueues, TAKE_WITHIN_MS, workersPlugin } from './fleet.js'
import { runsPlugin } from './runs.js'
import { slotsPlugin } from './slots.js'

export interface AppOptions {
  /** Overrides the logger built from config (tests pass false or a stream). */
  logger?: FastifyServerOptions['logger']
  /** Environment the agents inherit. */
  agentEnv?: NodeJS.ProcessEnv
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Each agent as found, for /readyz and the startup log. */
    readiness: () => Promise<AgentReadiness[]>
    containment: { mode: ContainmentMode; reason: string; escapes: string; limits: string }
  }
}

/**
 * The service, assembled once per process (tests build it too): the server, then its parts as plugins in the order
 * they depend on each other (slots, the platform, the runs), then the routes. Each part is given the settings it
 * reads; this is the one place the whole configuration is read.
 */
export async function buildApp(config: Config, options: AppOptions = {}): Promise<FastifyInstance> {
  const app = createServer(config, options.logger)
  const serviceEnv = options.agentEnv ?? process.env
  const tools = defineTools(
    // With AGENT_USERS no agent runs as the service: any of the range's uids says who they are, never root.
    {
      agents: config.agents,
      agentEnvRule: config.agentEnvRule,
      agentUserUid: config.agentUser?.uid ?? config.agentUsers?.range.first
    },
    serviceEnv
  )
  const limits = Object.fromEntries(config.agents.map(({ spec, settings }) => [toolNameOf(spec), settings.maxAgents]))
  const maxQueued = Object.fromEntries(
    config.agents.map(({ spec, settings }) => [toolNameOf(spec), settings.maxQueued])
  )
  const fleet = fleetOf(config)
  await app.register(slotsPlugin, { limits, maxQueued, backend: config.slots, fleetPrefix: fleet?.prefix })
  const metrics = new Metrics(Object.keys(tools), app.slots, app.slotQueue)
  // What the service's own helpers (sudo probe, wsl --list, leftover stops) inherit: the common variables only.
  const agentEnv = buildAgentEnv(serviceEnv, config.agentEnvRule)
  const { dataDir, agentWorkdir, agentUser, wslBin } = config
  await app.register(platformPlugin, {
    dataDir,
    containment: config.containment,
    runLimits: config.runLimits,
    agentUsers: config.agentUsers && { ...config.agentUsers, tokens: callerNames(config.apiTokens) },
    agentWorkdir,
    agentUser,
    wslBin,
    agentEnv
  })
  const { hostPlatform, killGraceMs, outputLimitBytes, modelPrices, dailyCostUsd } = config
  const queues = config.role === 'api'
    ? await runQueues(fleet!, Object.keys(tools), (close) => { app.addHook('onClose', close) })
    : undefined
  await app.register(runsPlugin, {
    tools,
    store: storeChoice(config),
    launch: {
      hostPlatform, wslBin, agentWorkdir, agentUser, killGraceMs, outputLimitBytes, modelPrices, dailyCostUsd
    },
    sudoProbeTtlMs: config.sudoProbeTtlMs,
    agentEnv,
    metrics,
    webhooks: config.webhooks,
    worktrees: { ...config.workspaces, diffRetentionMs: config.runsRetentionMs, hostPlatform, wslBin },
    ...(queues === undefined ? {} : { fleet: { queues, takeWithinMs: TAKE_WITHIN_MS } })
  })
  const { platform } = app
  const probes = new AbortController()
  app.addHook('onClose', () => { probes.abort() })
  app.decorate('readiness', agentReadiness(Object.values(tools), {
    signal: probes.signal, bind: platform.host.bindToService, user: agentUser
  }))
  const concurrency = config.role === 'worker' ? takenHere(config, await app.readiness(), app.log) : {}
  const places = config.role === 'worker' ? placesHere(config) : []
  if (config.role === 'worker') {
    await app.register(workersPlugin, { fleet: fleet!, name: platform.replica, concurrency, places })
  }
  await app.after()
  const roll = config.role === 'all'
    ? undefined
    : await joinFleet({
      fleet: fleet!,
      self: { id: platform.replica, role: config.role, agents: concurrency, places },
      healthFile: config.healthFile
    }, (close) => { app.addHook('onClose', close) })
  if (roll !== undefined) metrics.countFleet(() => roll.list(), queues?.waiting)
  const mode = platform.host.containment.mode
  app.decorate('containment', {
    mode,
    reason: platform.host.reason,
    escapes: whatEscapes(mode, process.platform, config.agentUsers !== undefined, platform.cgroups),
    limits: platform.limits
  })
  const isolation = { agents_can_reach: whatAgentsCanReach(config, mode) }
  for (const reach of isolation.agents_can_reach) app.log.warn(`agents can reach ${reach}`)
  // A worker serves no request: it only needs to reach the fleet's Redis.
  if (config.role === 'worker') return app
  await app.register(routesPlugin, {
    host: config.host,
    apiTokens: config.apiTokens,
    allowedHosts: config.allowedHosts,
    publicUrl: config.publicUrl,
    heartbeatMs: config.heartbeatMs,
    tools,
    metrics,
    readiness: app.readiness,
    containment: app.containment,
    isolation,
    ...(roll === undefined ? {} : { fleet: { members: () => roll.list() } })
  })
  return app
}

/**
 * The tools a worker takes, each with how many runs at once: WORKER_MAX_<AGENT>_AGENTS above 0, and only an agent it
 * can run (found, no `problem`): a run handed to a worker without its CLI would only be refused there, when another
 * worker could have run it.
 */
function takenHere(config: Config, found: AgentReadiness[], log: FastifyBaseLogger): Record<string, number> {
  const usable = new Set(found.filter(({ path, problem }) => path !== null && problem === null).map(({ tool }) => tool))
  const taken: Record<string, number> = {}
  for (const { spec, settings } of config.agents) {
    const tool = toolNameOf(spec)
    if (settings.workerMaxAgents === 0) continue
    if (usable.has(tool)) taken[tool] = settings.workerMaxAgents
    else log.warn({ tool }, `${tool}: not taken by this worker: its agent cannot run here`)
  }
  return taken
}

/** Only a Windows host runs agents inside WSL (AGENT_HOST_PLATFORM): its workers take those runs too. */
const placesHere = (config: Config): RunPlace[] => config.hostPlatform === 'win32' ? ['host', 'wsl'] : ['host']

/** The fleet's queues: in its Redis, beside its slots; a worker silent for SLOTS_TTL_MS has lost its runs. */
function fleetOf(config: Config): FleetOptions | undefined {
  if (config.slots.backend !== 'redis') return undefined
  const { url, keyPrefix, ttlMs } = config.slots
  return { url, prefix: `${keyPrefix}queues`, lockDurationMs: ttlMs }
}

/** RUNS_STORE, with the fleet's Redis connection when it is there. */
function storeChoice(config: Config): Parameters<typeof runsPlugin>[1]['store'] {
  const retention = {
    retentionMs: config.runsRetentionMs,
    maxFinished: config.runsMaxFinished,
    sessionsRetentionMs: config.sessionsRetentionMs,
    sessionsMaxPerOwner: config.sessionsMaxPerOwner
  }
  if (config.runsStore !== 'redis') return { kind: config.runsStore, dataDir: config.dataDir, retention }
  if (config.slots.backend !== 'redis') throw new Error('RUNS_STORE=redis needs SLOTS_BACKEND=redis')
  const { url, keyPrefix, ttlMs, timeoutMs } = config.slots
  return { kind: 'redis', retention, url, keyPrefix, ttlMs, timeoutMs }
}

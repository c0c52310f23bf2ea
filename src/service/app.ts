import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import { agentReadiness } from '../agents/readiness.js'
import { buildAgentEnv } from '../agents/environment.js'
import { toolNameOf } from '../agents/spec.js'
import { defineTools } from '../agents/tools.js'
import type { Config } from '../config.js'
import type { FleetOptions } from '../fleet/run-jobs.js'
import { callerNames } from '../http/auth.js'
import { createServer, routesPlugin } from '../http/app.js'
import { whatAgentsCanReach } from '../isolation.js'
import { Metrics } from '../metrics.js'
import { whatEscapes } from '../process/host-containment.js'
import type { AgentReadiness, ContainmentMode } from '../schemas/health.js'
import { platformPlugin } from './platform.js'
import { runQueues, TAKE_WITHIN_MS, workersPlugin } from './fleet.js'
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
    { agents: config.agents, agentEnvRule: config.agentEnvRule, agentUserUid: config.agentUser?.uid },
    serviceEnv
  )
  const limits = Object.fromEntries(config.agents.map(({ spec, settings }) => [toolNameOf(spec), settings.maxAgents]))
  const maxQueued = Object.fromEntries(
    config.agents.map(({ spec, settings }) => [toolNameOf(spec), settings.maxQueued])
  )
  await app.register(slotsPlugin, { limits, maxQueued, backend: config.slots })
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
  const fleet = fleetOf(config)
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
  if (config.role === 'worker') {
    const concurrency = Object.fromEntries(
      config.agents.map(({ spec, settings }) => [toolNameOf(spec), settings.workerMaxAgents])
    )
    await app.register(workersPlugin, { fleet: fleet!, name: app.platform.replica, concurrency })
  }
  await app.after()
  const { platform } = app
  const probes = new AbortController()
  app.addHook('onClose', () => { probes.abort() })
  app.decorate('readiness', agentReadiness(Object.values(tools), {
    signal: probes.signal, bind: platform.host.bindToService, user: agentUser
  }))
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
    isolation
  })
  return app
}

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

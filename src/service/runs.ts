import type { FastifyBaseLogger } from 'fastify'
import fp from 'fastify-plugin'
import type { ToolName } from '../agents/catalog.js'
import type { AgentTool } from '../agents/tools.js'
import { WslDistros } from '../process/wsl-distros.js'
import { RunLauncher, type LauncherDeps } from '../runs/launcher.js'
import { RunRegistry, type RegistryOptions } from '../runs/registry.js'
import { RunWorktrees, type WorktreeSettings } from '../runs/run-worktree.js'
import { MemoryRunStore } from '../runs/stores/memory-store.js'
import type { RetentionOptions, RunStore } from '../runs/stores/run-store.js'
import { SqliteRunStore } from '../runs/stores/sqlite-store.js'
import { StepsThread } from '../runs/steps-thread.js'
import { OutputChecks } from '../runs/output-checks.js'
import { SudoProbe } from '../sudo/probe.js'
import { version } from '../version.js'
import { WebhookDispatcher, type AttemptVerdict } from '../webhooks/dispatcher.js'
import type { WebhookSettings } from '../webhooks/policy.js'

/**
 * How often a running async run's new events reach the store: what a crash may lose, and how far other replicas
 * lag.
 */
const RUN_SAVE_EVERY_MS = 200

/** How often the outbox is read for retries falling due and what other replicas (or lives) left to deliver. */
const WEBHOOK_POLL_MS = 1000

export interface RunsOptions {
  tools: Record<ToolName, AgentTool>
  /** Where async runs are kept (RUNS_STORE); Redis with the fleet's connection. */
  store:
    | { kind: 'memory' | 'sqlite'; dataDir: string; retention: RetentionOptions }
    | { kind: 'redis'; retention: RetentionOptions; url: string; keyPrefix: string; ttlMs: number; timeoutMs: number }
  launch: LauncherDeps['settings']
  sudoProbeTtlMs: number
  /** What the service's own helpers (sudo probe, wsl --list) inherit: the common variables only. */
  agentEnv: NodeJS.ProcessEnv
  metrics: RegistryOptions['metrics'] & {
    /** Each webhook attempt, by what came of it. */
    observeWebhookAttempt(verdict: AttemptVerdict): void
    /** How many deliveries are due or being retried, whenever the metrics ask. */
    countPendingDeliveries(pending: () => Promise<number>): void
  }
  webhooks: WebhookSettings
  /** Worktree runs' settings; their state goes under DATA_DIR. */
  worktrees: Omit<WorktreeSettings, 'stateDir'>
  /** ROLE=api: the fleet's queues async runs are handed to. */
  fleet?: RegistryOptions['fleet']
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The one door into runs: every route launches, finds and stops runs here. */
    runs: RunRegistry
  }
}

/**
 * The runs: their store (what a previous life left running there now lost), the launcher, the registry. Shutdown
 * stops every run before the server stops accepting, so that their requests answer with what the agents did.
 */
export const runsPlugin = fp<RunsOptions>(async (app, options) => {
  const { slots, platform } = app
  const { killGraceMs } = options.launch
  const store = await runStore(options.store, platform.replica, app.log)
  app.addHook('onClose', async () => { await store.close() })
  const lost = await store.recover()
  if (lost.length > 0) app.log.warn({ runs: lost }, `${lost.length} run(s) of a previous life ended with it: now lost`)
  const worktrees = new RunWorktrees({ ...options.worktrees, stateDir: platform.dataDir })
  const swept = await worktrees.start(store, app.log)
  if (swept.length > 0) app.log.warn({ worktrees: swept }, `removed ${swept.length} worktree(s) nothing needs any more`)
  app.addHook('onClose', async () => { await worktrees.stop() })
  const stepsThread = new StepsThread((error) => {
    app.log.error({ err: error }, 'the steps thread failed: the runs it was reading end without their steps')
  })
  app.addHook('onClose', async () => { await stepsThread.close() })
  const outputChecks = new OutputChecks()
  app.addHook('onClose', async () => { await outputChecks.close() })
  const launcher = new RunLauncher({
    stepsThread,
    checkAnswer: (answer, schema) => outputChecks.check(answer, schema),
    settings: options.launch,
    tools: options.tools,
    slots,
    queue: app.slotQueue,
    sudoProbe: new SudoProbe(options.sudoProbeTtlMs, options.agentEnv),
    sudoShim: platform.sudoShim,
    hostContainment: platform.containment,
    ledger: platform.ledger,
    wslDistros: new WslDistros(options.launch.wslBin, options.agentEnv),
    sessions: store,
    tokenUsers: platform.tokenUsers,
    webhooks: options.webhooks,
    worktrees,
    spend: store.spend
  })
  const dispatcher = new WebhookDispatcher({
    outbox: store.outbox,
    settings: options.webhooks,
    replica: platform.replica,
    userAgent: `agent-runner/${version}`,
    log: app.log.child({ component: 'webhooks' }),
    attempted: (verdict) => options.metrics.observeWebhookAttempt(verdict),
    // A retry falls due at the backoff's base at the earliest: looked for no less often than that, up to every second.
    pollMs: Math.min(WEBHOOK_POLL_MS, options.webhooks.retryBaseMs)
  })
  options.metrics.countPendingDeliveries(() => store.outbox.pendingDeliveries())
  const runs = new RunRegistry({
    launcher,
    metrics: options.metrics,
    replica: platform.replica,
    store,
    outputLimitBytes: options.launch.outputLimitBytes,
    saveEveryMs: RUN_SAVE_EVERY_MS,
    remoteStopWaitMs: 3 * killGraceMs + 5000,
    webhookDue: () => dispatcher.wake(),
    diffs: worktrees,
    // A2A's bodies need its SDK: loaded by the first push, as by the first A2A request.
    pushBody: async (moment, state) => (await import('../http/a2a/tasks.js')).pushBody(moment, state),
    ...(options.fleet === undefined ? {} : { fleet: options.fleet })
  })
  app.decorate('runs', runs)
  // What a previous life, or a dead replica, left to deliver goes out from the start.
  dispatcher.start()
  // The runs' ends reach the outbox before the dispatcher stops; what it had not sent, a later life sends.
  app.addHook('preClose', async () => {
    await runs.shutdown()
    await dispatcher.close()
  })
}, { name: 'runs', dependencies: ['slots', 'platform'] })

/** The store RUNS_STORE names; each is loaded only when chosen (a native module, a Redis client). */
async function runStore(choice: RunsOptions['store'], replica: string, log: FastifyBaseLogger): Promise<RunStore> {
  if (choice.kind !== 'redis') {
    return choice.kind === 'memory'
      ? new MemoryRunStore(choice.retention)
      : new SqliteRunStore(choice.dataDir, choice.retention, replica)
  }
  const { RedisRunStore } = await import('../runs/stores/redis-store.js')
  const { retention, kind: _kind, ...redis } = choice
  return new RedisRunStore({ ...retention, ...redis, replica, log })
}

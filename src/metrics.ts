import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { FleetMember } from './schemas/health.js'
import { finishedStatus } from './runs/result.js'
import { isEnd as isEndPhase, RUN_PHASES, type RunPhase } from './runs/run-phase.js'
import type { RunResult } from './schemas/run.js'
import type { SlotLimiter } from './slots/limiter.js'
import type { SlotQueue } from './slots/queue.js'

/**
 * Runs last from seconds to the 30-minute cap: buckets spread over that range rather than prom-client's web
 * defaults.
 */
const RUN_DURATION_BUCKETS = [1, 5, 15, 30, 60, 120, 300, 600, 900, 1200, 1800]
/** A run's wait for a slot: none (most), a slot freed within the queue's 200 ms retry, up to `queue_timeout`'s cap. */
const QUEUE_WAIT_BUCKETS = [0.005, 0.05, 0.25, 1, 5, 15, 60, 300, 900, 1800]

/**
 * The service's Prometheus metrics, in a registry of their own so that several apps in one process (tests) never share
 * or collide on counters.
 */
export class Metrics {
  readonly registry = new Registry()
  readonly #runs: Counter<'tool' | 'outcome'>
  readonly #duration: Histogram<'tool'>
  readonly #queueWait: Histogram<'tool'>
  readonly #rejections: Counter<'tool' | 'reason'>
  readonly #webhookAttempts: Counter<'outcome'>
  readonly #tokens: Counter<'caller' | 'tool' | 'kind'>
  readonly #cost: Counter<'caller' | 'tool'>
  #pendingDeliveries: (() => Promise<number>) | undefined
  #phases: (() => RunPhase[]) | undefined
  readonly #tools: readonly string[]

  constructor(tools: readonly string[], slots: SlotLimiter, queue: Pick<SlotQueue, 'queued'>) {
    this.#tools = tools
    collectDefaultMetrics({ register: this.registry })
    const registers = [this.registry]
    this.#runs = new Counter({
      name: 'agent_runner_runs_total',
      help: 'Agent runs that started, by tool and outcome',
      labelNames: ['tool', 'outcome'],
      registers
    })
    this.#duration = new Histogram({
      name: 'agent_runner_run_duration_seconds',
      help: 'Duration of agent runs, by tool',
      labelNames: ['tool'],
      buckets: RUN_DURATION_BUCKETS,
      registers
    })
    this.#queueWait = new Histogram({
      name: 'agent_runner_queue_wait_seconds',
      help: 'How long runs that got a slot waited for it, by tool (0 for most: a free slot)',
      labelNames: ['tool'],
      buckets: QUEUE_WAIT_BUCKETS,
      registers
    })
    this.#rejections = new Counter({
      name: 'agent_runner_rejections_total',
      help: 'Run requests answered without running an agent, by tool and error code',
      labelNames: ['tool', 'reason'],
      registers
    })
    this.#webhookAttempts = new Counter({
      name: 'agent_runner_webhook_deliveries_total',
      help: 'Webhook delivery attempts, by outcome: delivered, failed (to be retried), gone (410), given_up',
      labelNames: ['outcome'],
      registers
    })
    this.#tokens = new Counter({
      name: 'agent_runner_tokens_total',
      help: 'Tokens the runs that ended used, as their CLIs reported them, by token name, tool and kind',
      labelNames: ['caller', 'tool', 'kind'],
      registers
    })
    this.#cost = new Counter({
      name: 'agent_runner_cost_usd_total',
      help: 'Dollars the runs that ended cost (their CLI’s figure, or MODEL_PRICES_FILE’s), by token name and tool',
      labelNames: ['caller', 'tool'],
      registers
    })
    const pendingDeliveries = (): Promise<number> => this.#pendingDeliveries?.() ?? Promise.resolve(0)
    // eslint-disable-next-line no-new -- registered on construction; its collect() asks the store at each scrape
    new Gauge({
      name: 'agent_runner_webhook_deliveries_pending',
      help: 'Webhook deliveries due or waiting for a retry, in the run store (fleet-wide with Redis)',
      registers,
      async collect() {
        this.set(await pendingDeliveries().catch(() => 0))
      }
    })
    const phases = (): RunPhase[] => this.#phases?.() ?? []
    // eslint-disable-next-line no-new -- registered on construction; its collect() reads the runs at each scrape
    new Gauge({
      name: 'agent_runner_runs',
      help: 'Runs of this replica not yet ended, by phase: a run stuck waiting_for_slot or stopping shows here',
      labelNames: ['phase'],
      registers,
      collect() {
        const now = phases()
        for (const phase of RUN_PHASES.filter((each) => !isEndPhase(each))) {
          this.set({ phase }, now.filter((each) => each === phase).length)
        }
      }
    })
    // eslint-disable-next-line no-new -- registered on construction; its collect() reads the queue at each scrape
    new Gauge({
      name: 'agent_runner_queued',
      help: 'Runs waiting for a slot (queue_timeout), by tool: this replica’s own',
      labelNames: ['tool'],
      registers,
      collect() {
        for (const tool of tools) this.set({ tool }, queue.queued(tool))
      }
    })
    // eslint-disable-next-line no-new -- registered on construction; its collect() reads the slots at each scrape
    new Gauge({
      name: 'agent_runner_slots_in_use',
      help: 'Agent slots held, by tool',
      labelNames: ['tool'],
      registers,
      collect() {
        for (const tool of tools) this.set({ tool }, slots.inUse(tool))
      }
    })
  }

  /**
   * A fleet's member (ROLE=api or worker): who is on the fleet's roll, and on an API replica the runs handed over that
   * no worker has taken yet. Read from Redis at each scrape; a scrape while Redis is away shows none.
   */
  countFleet(members: () => Promise<FleetMember[]>, waiting?: (tool: string) => Promise<number>): void {
    const registers = [this.registry]
    // eslint-disable-next-line no-new -- registered here; its collect() reads the roll at each scrape
    new Gauge({
      name: 'agent_runner_fleet_members',
      help: 'API replicas and workers seen on the fleet’s roll within SLOTS_TTL_MS, by role',
      labelNames: ['role'],
      registers,
      async collect() {
        const seen = await members().catch(() => [])
        for (const role of ['api', 'worker'] as const) {
          this.set({ role }, seen.filter((each) => each.role === role).length)
        }
      }
    })
    if (waiting === undefined) return
    const tools = this.#tools
    // eslint-disable-next-line no-new -- registered here; its collect() asks the queues at each scrape
    new Gauge({
      name: 'agent_runner_fleet_waiting',
      help: 'Runs handed to the fleet that no worker has taken yet, by tool (fleet-wide)',
      labelNames: ['tool'],
      registers,
      async collect() {
        await Promise.all(tools.map(async (tool) => { this.set({ tool }, await waiting(tool).catch(() => 0)) }))
      }
    })
  }

  /** Where this replica's runs are now: read at each scrape. */
  countRunsBy(phases: () => RunPhase[]): void {
    this.#phases = phases
  }

  /** A run that ended, and what its caller's token spent on it. */
  observeRun(result: RunResult, caller: string): void {
    const { tool, usage } = result
    this.#runs.inc({ tool, outcome: finishedStatus(result) })
    this.#duration.observe({ tool }, result.duration_ms / 1000)
    if (usage === null) return
    this.#tokens.inc({ caller, tool, kind: 'input' }, usage.input_tokens ?? 0)
    this.#tokens.inc({ caller, tool, kind: 'output' }, usage.output_tokens ?? 0)
    if (usage.cost_usd !== null) this.#cost.inc({ caller, tool }, usage.cost_usd)
  }

  /** A run got its slot after waiting this long. */
  observeQueueWait(tool: string, seconds: number): void {
    this.#queueWait.observe({ tool }, seconds)
  }

  observeWebhookAttempt(outcome: string): void {
    this.#webhookAttempts.inc({ outcome })
  }

  /** Where the pending deliveries are counted: read at each scrape. */
  countPendingDeliveries(pending: () => Promise<number>): void {
    this.#pendingDeliveries = pending
  }

  observeRejection(tool: string, code: string): void {
    this.#rejections.inc({ tool, reason: code })
  }
}

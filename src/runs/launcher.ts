import type { FastifyBaseLogger } from 'fastify'
import type { AgentTool, ToolName } from '../agents/tools.js'
import type { Config } from '../config.js'
import { serviceError } from '../errors.js'
import type { Metrics } from '../metrics.js'
import type { RunHooks } from '../process/agent-process.js'
import type { Containment } from '../process/containment.js'
import type { RunLedger } from '../process/ledger.js'
import type { WslDistros } from '../process/wsl-distros.js'
import type { RunParams, RunResult } from '../schemas/run.js'
import type { SlotLimiter } from '../slots/limiter.js'
import type { SudoProbe } from '../sudo/probe.js'
import type { SudoShim } from '../sudo/shim.js'
import { runPlacedAgent } from './agent-run.js'
import { placeRun, type Placement } from './placement.js'
import { assertRunnableOnWindows } from './windows-checks.js'
import { assertHostDirectory } from './workspace.js'

export interface LauncherDeps {
  config: Config
  tools: Record<ToolName, AgentTool>
  slots: SlotLimiter
  sudoProbe: SudoProbe
  sudoShim: SudoShim | undefined
  metrics: Metrics
  hostContainment: Containment
  ledger: RunLedger
  wslDistros: WslDistros
}

export interface LaunchContext {
  runId: string
  signal: AbortSignal
  log: FastifyBaseLogger
  hooks: RunHooks
}

/** Someone follows the output as it comes (a stream, an async run), so progress events are worth printing. */
const isLive = (hooks: RunHooks): boolean => hooks.onOutput !== undefined || hooks.sink !== undefined

/**
 * The steps every way of running shares — synchronous, streamed, asynchronous: decide where the run goes, check the
 * request against that place, hold a slot for exactly the life of the run, run, count.
 */
export class RunLauncher {
  readonly #deps: LauncherDeps

  constructor(deps: LauncherDeps) {
    this.#deps = deps
  }

  /**
   * A run's whole life: everything that can refuse a valid body before an agent starts (where it would run: 400; a
   * slot: 429), then the agent, holding the slot for exactly as long as it runs and giving it back whatever happens.
   */
  async execute(name: ToolName, params: RunParams, context: LaunchContext): Promise<RunResult> {
    const { config, slots, sudoProbe, sudoShim, metrics, ledger } = this.#deps
    const tool = this.#deps.tools[name]!
    const refusal = tool.refuseTask(params.task)
    if (refusal !== null) throw serviceError('VALIDATION_ERROR', `body/task: ${refusal}`)
    const placement = this.#place(tool, params, context)
    await this.#assertPlaceable(placement, params)
    const lease = await slots.acquire(name)
    if (lease === null) throw serviceError('AGENT_LIMIT_REACHED', slots.limit(name))
    try {
      const result = await runPlacedAgent(tool, placement, params, { config, sudoProbe, sudoShim, ledger, ...context })
      metrics.observeRun(result)
      return result
    } finally {
      lease.release()
    }
  }

  #place(tool: AgentTool, params: RunParams, context: LaunchContext): Placement {
    const { config, hostContainment } = this.#deps
    return placeRun({
      params,
      agentBin: tool.bin,
      agentArgs: tool.agentArgs(params.task, isLive(context.hooks)),
      hostPlatform: config.hostPlatform,
      wslBin: config.wslBin,
      hostContainment,
      env: tool.env,
      runId: context.runId,
      defaultCwd: config.agentWorkdir,
      user: config.agentUser
    })
  }

  async #assertPlaceable(placement: Placement, params: RunParams): Promise<void> {
    if (this.#deps.config.hostPlatform === 'win32') await assertRunnableOnWindows(placement, this.#deps.wslDistros)
    if (placement.where === 'host' && params.cwd !== undefined) await assertHostDirectory(params.cwd, placement.user)
  }
}

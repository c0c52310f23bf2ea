import type { FastifyBaseLogger } from 'fastify'
import { runsInWsl } from '../agents/placement.js'
import { assertRunnableOnWindows } from '../agents/windows-checks.js'
import type { AgentTool, ToolName } from '../agents/definitions.js'
import { runTool } from '../agents/run-tool.js'
import type { RunHooks } from '../agents/runner.js'
import { assertHostDirectory } from '../agents/workspace.js'
import type { Config } from '../config.js'
import { agentLimitReached, ValidationFailed } from '../errors.js'
import type { Metrics } from '../metrics.js'
import type { Containment } from '../process/containment.js'
import type { RunLedger } from '../process/ledger.js'
import type { WslDistros } from '../process/wsl-distros.js'
import type { RunParams, RunResult } from '../schemas/run.js'
import type { SlotLimiter } from '../slots/limiter.js'
import type { SudoProbe } from '../sudo/probe.js'

export interface LauncherDeps {
  config: Config
  tools: Record<ToolName, AgentTool>
  slots: SlotLimiter
  agentEnv: NodeJS.ProcessEnv
  sudoProbe: SudoProbe
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

/**
 * The steps every way of running shares — synchronous, streamed, asynchronous: check the request against the host,
 * hold a slot for exactly the life of the run, run, count.
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
    const { config, slots, agentEnv, sudoProbe, metrics, hostContainment, ledger } = this.#deps
    const tool = this.#deps.tools[name]!
    const refusal = tool.refuseTask(params.task)
    if (refusal !== null) throw new ValidationFailed(`body/task: ${refusal}`)
    if (config.hostPlatform === 'win32') await assertRunnableOnWindows(tool, params, config.wslBin, this.#deps.wslDistros)
    if (params.cwd !== undefined && !runsInWsl(params, config.hostPlatform)) await assertHostDirectory(params.cwd)
    const lease = await slots.acquire(name)
    if (lease === null) throw agentLimitReached(slots.limit(name))
    try {
      const result = await runTool(tool, params, { config, env: agentEnv, sudoProbe, hostContainment, ledger, ...context })
      metrics.observeRun(result)
      return result
    } finally {
      lease.release()
    }
  }
}

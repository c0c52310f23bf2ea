import type { FastifyBaseLogger } from 'fastify'
import type { ToolName } from '../agents/catalog.js'
import type { AgentTool } from '../agents/tools.js'
import type { Config } from '../config.js'
import { serviceError } from '../errors.js'
import type { RunHooks } from '../process/agent-process.js'
import type { Containment } from '../process/containment.js'
import type { RunLedger } from '../process/ledger.js'
import type { WslDistros } from '../process/wsl-distros.js'
import type { RunParams, RunResult } from '../schemas/run.js'
import type { SlotLimiter } from '../slots/limiter.js'
import type { SudoProbe } from '../sudo/probe.js'
import type { SudoShim } from '../sudo/shim.js'
import type { Step } from '../schemas/steps.js'
import { runPlacedAgent } from './agent-run.js'
import { placeRun, type Placement } from './placement.js'
import type { Run } from './run.js'
import { RunSteps } from './run-steps.js'
import { assertRunnableOnWindows } from './windows-checks.js'
import { assertHostDirectory } from './workspace.js'

export interface LauncherDeps {
  config: Config
  tools: Record<ToolName, AgentTool>
  slots: SlotLimiter
  sudoProbe: SudoProbe
  sudoShim: SudoShim | undefined
  hostContainment: Containment
  ledger: RunLedger
  wslDistros: WslDistros
}

/** What a launch's caller may watch: the process's hooks, and the steps read from the agent's structured output. */
export interface LaunchHooks extends RunHooks {
  onStep?: (step: Step) => void
}

/** Someone follows the output as it comes (a stream, an async run, an MCP call with progress). */
const followedLive = (hooks: RunHooks): boolean => hooks.onOutput !== undefined || hooks.sink !== undefined

/**
 * The one way a run of any kind goes from opened to its end: the agent accepts the task, the run is placed and the
 * place checked, a slot is taken, the agent runs and is watched, the slot goes back. Each step is a phase of the run
 * (run-phase.ts); whatever fails or stops it before its agent starts refuses it, with the caller's 4xx or 503.
 */
export class RunLauncher {
  readonly #deps: LauncherDeps

  constructor(deps: LauncherDeps) {
    this.#deps = deps
  }

  async launch(run: Run, params: RunParams, log: FastifyBaseLogger, hooks: LaunchHooks = {}): Promise<RunResult> {
    try {
      const result = await this.#launch(run, params, log, hooks)
      run.finish(result)
      return result
    } catch (error) {
      run.abort()
      throw error
    }
  }

  async #launch(run: Run, params: RunParams, log: FastifyBaseLogger, launchHooks: LaunchHooks): Promise<RunResult> {
    const { config, slots, sudoProbe, sudoShim, ledger } = this.#deps
    const tool = this.#deps.tools[run.tool]
    const refusal = tool.refuseTask(params.task)
    if (refusal !== null) throw serviceError('VALIDATION_ERROR', `body/task: ${refusal}`)
    const { onStep, ...hooks } = launchHooks
    const parser = tool.steps()
    const steps = parser === null ? null : new RunSteps(parser, onStep)
    const live = followedLive(hooks)
    const placement = this.#place(tool, params, run.id)
    await this.#assertPlaceable(placement, params)
    run.advance('placed')
    run.advance('waiting_for_slot')
    const lease = await slots.acquire(run.tool)
    if (lease === null) throw serviceError('AGENT_LIMIT_REACHED', slots.limit(run.tool))
    try {
      run.advance('starting')
      const result = await runPlacedAgent(tool, placement, params, {
        config,
        sudoProbe,
        sudoShim,
        ledger,
        runId: run.id,
        signal: run.signal,
        log,
        live,
        steps,
        hooks: {
          ...hooks,
          ...(steps === null ? {} : { onStdout: (chunk: Buffer) => steps.push(chunk) }),
          onSpawn: (pid) => {
            run.agentStarted()
            hooks.onSpawn?.(pid)
          },
          onStopping: () => run.stopping()
        }
      })
      return result
    } finally {
      lease.release()
    }
  }

  #place(tool: AgentTool, params: RunParams, runId: string): Placement {
    const { config, hostContainment } = this.#deps
    return placeRun({
      params,
      agentBin: tool.settings.bin,
      agentArgs: tool.args(params.task),
      hostPlatform: config.hostPlatform,
      wslBin: config.wslBin,
      hostContainment,
      env: tool.env,
      runId,
      defaultCwd: config.agentWorkdir,
      user: config.agentUser
    })
  }

  async #assertPlaceable(placement: Placement, params: RunParams): Promise<void> {
    if (this.#deps.config.hostPlatform === 'win32') await assertRunnableOnWindows(placement, this.#deps.wslDistros)
    if (placement.where === 'host' && params.cwd !== undefined) await assertHostDirectory(params.cwd, placement.user)
  }
}

import type { FastifyBaseLogger } from 'fastify'
import { userInfo } from 'node:os'
import type { Config } from '../config.js'
import { AgentNotInstalled, AgentSpawnFailed, ClientClosedRequest, ShuttingDown } from '../errors.js'
import type { Containment } from '../process/containment.js'
import type { RunLedger } from '../process/ledger.js'
import type { RunParams, RunResult } from '../schemas/run.js'
import { SudoPasswordDetector } from '../sudo/detector.js'
import { sudoPasswordMessage } from '../sudo/message.js'
import type { SudoContext, SudoProbe } from '../sudo/probe.js'
import type { AgentTool } from './definitions.js'
import { placeRun, type Placement } from './placement.js'
import { toRunResult } from './result.js'
import { AgentSpawnError } from '../process/spawn-error.js'
import { RunAbandoned, runAgent, type RunHooks } from './runner.js'
import { assertHostDirectory } from './workspace.js'

export interface RunContext {
  config: Config
  env: NodeJS.ProcessEnv
  /** How runs on this host are contained (WSL runs bring their own). */
  hostContainment: Containment
  ledger: RunLedger
  runId: string
  sudoProbe: SudoProbe
  signal: AbortSignal
  log: FastifyBaseLogger
  /** onSpawn: from here on the run answers 200, whatever happens. */
  hooks: RunHooks
}

export function placementFor(tool: AgentTool, params: RunParams, context: RunContext, live: boolean): Placement {
  return placeRun({
    params,
    agentBin: tool.bin,
    agentArgs: tool.agentArgs(params.task, live),
    hostPlatform: context.config.hostPlatform,
    wslBin: context.config.wslBin,
    hostContainment: context.hostContainment,
    env: context.env,
    runId: context.runId,
    defaultCwd: context.config.agentWorkdir,
    user: context.config.agentUser
  })
}

/** Spawns the agent for a validated request holding a slot, and maps its end to the response. */
export async function runTool(tool: AgentTool, params: RunParams, context: RunContext): Promise<RunResult> {
  const { config, log, ledger, runId } = context
  const { hooks } = context
  const placement = placementFor(tool, params, context, hooks.onOutput !== undefined || hooks.sink !== undefined)
  const { command, sudo: sudoContext } = placement
  const sudoStatus = await context.sudoProbe.status(sudoContext)
  const sudoFailure = new SudoPasswordDetector()
  try {
    const outcome = await runAgent({
      command,
      containment: placement.containment,
      user: placement.user,
      env: placement.env,
      ledger: { started: (record) => ledger.started(runId, record), ended: () => ledger.ended(runId) },
      timeoutMs: params.timeout * 1000,
      killGraceMs: config.killGraceMs,
      outputLimitBytes: config.outputLimitBytes,
      signal: context.signal,
      onSpawn: (pid) => {
        log.info({ tool: tool.name, run: runId, agent_pid: pid, file: command.file, cwd: command.cwd, containment: placement.containment.mode }, 'agent run started')
        hooks.onSpawn?.(pid)
      },
      onOutput: (chunk) => {
        sudoFailure.push(chunk)
        hooks.onOutput?.(chunk)
      },
      sink: hooks.sink
    })
    const result = toRunResult(tool, command, outcome, {
      status: sudoStatus,
      password_needed: sudoFailure.detected,
      message: sudoFailure.detected ? sudoPasswordMessage(sudoContext, userInfo().username) : null
    })
    log.info(
      {
        tool: tool.name,
        run: runId,
        agent_pid: outcome.pid,
        exit_code: result.exit_code,
        signal: result.signal,
        stop_reason: result.stop_reason,
        duration_ms: result.duration_ms,
        output_bytes: result.output_bytes,
        ok: result.ok,
        sudo_password_needed: sudoFailure.detected
      },
      'agent run ended'
    )
    return result
  } catch (error) {
    if (error instanceof RunAbandoned) throw error.reason === 'shutdown' ? new ShuttingDown() : new ClientClosedRequest()
    if (!(error instanceof AgentSpawnError)) throw error
    // spawn says ENOENT both for a missing binary and for a directory removed since it was checked.
    if (error.errno === 'ENOENT' && command.cwd !== undefined) await assertHostDirectory(command.cwd)
    log.warn({ tool: tool.name, file: command.file, err: error }, 'agent could not be started')
    throw error.errno === 'ENOENT'
      ? new AgentNotInstalled(tool.agent, command.file)
      : new AgentSpawnFailed(tool.agent, error.message)
  }
}

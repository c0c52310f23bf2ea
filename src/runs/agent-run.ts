import type { FastifyBaseLogger } from 'fastify'
import { BUILT_IN_AGENTS } from '../agents/catalog.js'
import type { AgentTool } from '../agents/tools.js'
import { serviceError } from '../errors.js'
import { RunAbandoned, runAgent, type OutputSink } from '../process/agent-process.js'
import { LoopShare } from '../process/loop-share.js'
import type { RunLedger } from '../process/ledger.js'
import { AgentSpawnError, RunNotRecorded } from '../process/spawn-error.js'
import type { RunLimits } from '../schemas/limits.js'
import type { RunResult } from '../schemas/run.js'
import { SudoPasswordDetector } from '../sudo/detector.js'
import { sudoReport } from '../sudo/message.js'
import type { SudoProbe } from '../sudo/probe.js'
import {
  NOTHING_ASKED, WSL_SUDO_REPORT_SCRIPT, readSudoReport, type SudoAsked, type SudoShim, type SudoWatch
} from '../sudo/shim.js'
import { wslScriptOutput } from '../process/wsl-group.js'
import { findOnPath } from '../process/find-executable.js'
import type { Placement } from './placement.js'
import type { Pricing } from './run-budget.js'
import { toRunResult } from './result.js'
import { RunSteps, type StepsReport, type StepsWatch } from './run-steps.js'
import type { StepsThread } from './steps-thread.js'
import { stopRefusal, type Run } from './run.js'
import { assertHostDirectory } from './workspace.js'

/** What every run's agent is started and watched with: the launcher's own parts and the stop's settings. */
export interface AgentRunParts {
  ledger: RunLedger
  sudoProbe: SudoProbe
  /** Absent where agents never meet a host sudo (Windows). */
  sudoShim: SudoShim | undefined
  killGraceMs: number
  outputLimitBytes: number
  /** Where the built-in agents' steps are read, off the relay's thread; absent: on it. */
  stepsThread?: StepsThread | undefined
}

/**
 * Live runs (streams, async runs) encode every byte they read into events: each reads once per turn of the event loop
 * it is given, and each turn is given to one of them, so sixteen floods cannot hold the thread a health check waits
 * for. Measured (bench/findings.md): /healthz p99 under 16 floods 4.4× idle, against 5.9× when four read per turn,
 * for 20 % less throughput summed over the sixteen; one flood alone relays as fast either way.
 */
const LIVE_RELAY_TURNS = new LoopShare(1)

/**
 * The agent's sudo goes through the shim, which reports a password prompt whatever the CLI prints: on the host the
 * service's, inside WSL the one the start script set up in the distro, whose report one more wsl.exe call reads.
 */
async function watchSudo(
  placement: Placement,
  shim: SudoShim | undefined,
  runId: string,
  log: FastifyBaseLogger
): Promise<SudoWatch> {
  const { sudo, env, user, wsl } = placement
  if (wsl !== undefined) {
    return { env, end: async () => readSudoReport(await wslScriptOutput(wsl, runId, WSL_SUDO_REPORT_SCRIPT, env)) }
  }
  if (shim === undefined || sudo.kind !== 'host') return { env, end: NOTHING_ASKED }
  const changed = await shim.restore()
  if (changed.length > 0) log.warn({ changed }, 'the sudo shim had been changed (by an agent of the service’s user)')
  // Where the run's mount namespace can show it there, the shim stands at sudo's own path too: a sudo called by its
  // absolute path, its messages thrown away, still meets it.
  return shim.watch(env, await findOnPath('sudo', sudo.path), user, placement.containment.bindsFiles === true)
}

/** Someone follows the run's output as it comes (a stream, an async run, an MCP call with progress). */
const followedLive = (run: Run, sink: OutputSink | undefined): boolean =>
  sink !== undefined || run.listenerCount('output') > 0 || run.listenerCount('step') > 0

/** How far a run's agent may go, and how its tokens are priced. */
export interface RunBudget {
  limits: RunLimits | undefined
  pricing: Pricing
}

/** A run's steps being read: where its stdout goes when it is read on another thread, and the report at its end. */
interface StepsReading {
  stdoutSink?: OutputSink
  /** The output has ended: what its steps say (null: nothing could be read of them). */
  end(): Promise<StepsReport | null>
}

/**
 * The steps read from the agent's structured output as it comes, told by the run, held against its limits: the first
 * crossed stops the run as its deadline would. A built-in agent's JSON, when nobody follows its steps live, is
 * parsed on the steps thread where there is one (the same parser, off the thread that relays the output); null for a
 * CLI that prints nothing to read steps from.
 */
function readSteps(
  run: Run, tool: AgentTool, { limits, pricing }: RunBudget, thread: StepsThread | undefined
): StepsReading | null {
  const { spec } = tool
  if (spec.steps === undefined) return null
  const watch: StepsWatch = {
    onStep: (step) => run.emit('step', step), pricing, limits, onLimit: (reason) => run.stop(reason)
  }
  // JSON is parsed on the thread when the run's steps only make its result. Not lines of text, only split, no dearer
  // than relaying them (crush's 1 GiB sync relay took 1.6× as long through the thread); nor the steps of a run
  // followed live, which would each cross back to this thread as a copy (400 MiB of steps to a subscriber that read
  // none peaked 35–67 MiB higher).
  const offThread = thread !== undefined && tool.reportsActions && run.listenerCount('step') === 0 &&
    (BUILT_IN_AGENTS as readonly unknown[]).includes(spec)
    ? thread.open(spec.agent, watch, () => run.listenerCount('step') > 0)
    : null
  if (offThread !== null) return { stdoutSink: offThread.sink, end: () => offThread.end() }
  const steps = new RunSteps(spec.steps(), watch)
  run.on('stdout', (chunk) => steps.push(chunk))
  return {
    end: () => {
      steps.end()
      return Promise.resolve(steps.report())
    }
  }
}

/**
 * The agent's own part of a launch, its slot held: started where the placement says with sudo watched, logged, and
 * its end made the result (or its failure to start, the caller's error).
 */
export async function runPlacedAgent(
  run: Run,
  tool: AgentTool,
  placement: Placement,
  budget: RunBudget,
  parts: AgentRunParts,
  log: FastifyBaseLogger,
  sink?: OutputSink
): Promise<RunResult> {
  const { command } = placement
  const sudoStatus = await parts.sudoProbe.status(placement.sudo)
  const live = followedLive(run, sink)
  const sudoFailure = new SudoPasswordDetector()
  run.on('output', sudoFailure.push)
  const sudoWatch = await watchSudo(placement, parts.sudoShim, run.id, log)
  const steps = readSteps(run, tool, budget, parts.stepsThread)
  // Ended once, whatever ends the run: a run that never started leaves nothing open on the steps thread.
  const stepsReport = ((): (() => Promise<StepsReport | null>) => {
    let report: Promise<StepsReport | null> | undefined
    return () => (report ??= steps?.end() ?? Promise.resolve(null))
  })()
  run.once('spawn', (pid) => {
    log.info(
      {
        tool: tool.name,
        run: run.id,
        agent_pid: pid,
        file: command.file,
        cwd: command.cwd,
        containment: placement.containment.mode
      },
      'agent run started'
    )
  })
  let sudoAsked: Promise<SudoAsked> | undefined
  try {
    const outcome = await runAgent({
      command,
      containment: {
        by: placement.containment,
        runId: run.id,
        binds: sudoWatch.binds,
        limits: tool.settings.limits,
        ledger: { started: (record) => parts.ledger.started(run.id, record), ended: () => parts.ledger.ended(run.id) }
      },
      user: placement.user,
      env: sudoWatch.env,
      deadline: { timeoutMs: run.timeoutMs, killGraceMs: parts.killGraceMs },
      signal: run.signal,
      observer: run,
      output: {
        limitBytes: parts.outputLimitBytes,
        sink,
        stdoutSink: steps?.stdoutSink,
        turns: live ? LIVE_RELAY_TURNS : undefined
      }
    }).finally(() => { sudoAsked = sudoWatch.end() })
    const asked = await sudoAsked!
    const passwordNeeded = asked.passwordNeeded || sudoFailure.detected
    const sudo = sudoReport(sudoStatus, passwordNeeded, placement.sudo, asked.user)
    const result = toRunResult(tool, command, outcome, sudo, await stepsReport())
    log.info(
      {
        tool: tool.name,
        run: run.id,
        agent_pid: outcome.pid,
        exit_code: result.exit_code,
        signal: result.signal,
        stop_reason: result.stop_reason,
        duration_ms: result.duration_ms,
        output_bytes: result.output_bytes,
        ok: result.ok,
        sudo_password_needed: passwordNeeded
      },
      'agent run ended'
    )
    return result
  } catch (error) {
    void stepsReport()
    if (error instanceof RunAbandoned) throw serviceError(stopRefusal(error.reason))
    if (error instanceof RunNotRecorded) {
      log.error({ tool: tool.name, run: run.id, err: error }, 'run not recorded: its agent was killed at once')
      throw serviceError('RUN_NOT_RECORDED', error.message)
    }
    if (!(error instanceof AgentSpawnError)) throw error
    // spawn says ENOENT both for a missing binary and for a directory removed since it was checked.
    if (error.errno === 'ENOENT' && command.cwd !== undefined) await assertHostDirectory(command.cwd, placement.user)
    log.warn({ tool: tool.name, file: command.file, err: error }, 'agent could not be started')
    throw error.errno === 'ENOENT'
      ? serviceError('AGENT_NOT_INSTALLED', tool.spec.agent, command.file)
      : serviceError('AGENT_SPAWN_FAILED', tool.spec.agent, error.message)
  }
}

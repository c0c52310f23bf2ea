import type { RunResult, StopReason, SudoReport } from '../schemas/run.js'
import type { RunStatus } from '../schemas/runs.js'
import type { AgentCommand, AgentEnd } from '../process/agent-process.js'
import type { AgentTool } from '../agents/tools.js'
import type { StepsReport } from './run-steps.js'

/** The response of a run that started, whatever its end. */
export function toRunResult(
  tool: AgentTool,
  command: AgentCommand,
  outcome: AgentEnd,
  sudo: SudoReport,
  steps: StepsReport | null
): RunResult {
  const printed = outcome.output.toString()
  // Read as the output came, whole whatever of it `printed` kept.
  const parsed = steps?.parsed ?? null
  const timedOut = outcome.stopReason === 'timeout'
  // A limit the CLI stopped at itself (claude's own --max-turns), or one its steps crossed as it ended (codex reports
  // its usage last): not ok all the same, and said so.
  const stopReason = outcome.stopReason ?? parsed?.limit ?? steps?.limitCrossed ?? null
  return {
    tool: tool.name,
    ok:
      outcome.exitCode === 0 &&
      stopReason === null &&
      parsed?.report.is_error !== true &&
      steps?.allDenied !== true,
    exit_code: outcome.exitCode,
    signal: outcome.signal,
    timed_out: timedOut,
    stop_reason: stopReason,
    duration_ms: outcome.durationMs,
    // A report without an answer (claude's error subtypes) would leave nothing to read: show what was printed instead.
    output: parsed?.text || printed,
    output_truncated: outcome.output.truncated,
    output_bytes: outcome.output.totalBytes,
    command: [command.file, ...command.args],
    agent_report: parsed?.report ?? null,
    sudo,
    session_id: steps?.session_id ?? null,
    usage: steps?.usage ?? null,
    steps_summary: steps?.steps_summary ?? null,
    structured_output: null,
    error: null,
    changes: null,
    processes_may_remain: outcome.containmentFailed
  }
}

/** Stops for going past a limit: the run failed, nobody cancelled it. */
const OVER_LIMIT = new Set<StopReason>(['process_limit', 'memory_limit', 'max_turns', 'max_tokens', 'max_cost'])

/** How a run ended, in one word: the status a poller reads, and the metrics label. */
export function finishedStatus(
  result: Pick<RunResult, 'ok' | 'stop_reason'>
): Exclude<RunStatus, 'running' | 'lost'> {
  if (result.stop_reason === 'timeout') return 'timed_out'
  if (result.stop_reason !== null && OVER_LIMIT.has(result.stop_reason)) return 'failed'
  if (result.stop_reason !== null) return 'cancelled'
  return result.ok ? 'succeeded' : 'failed'
}

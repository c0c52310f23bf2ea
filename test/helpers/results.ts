import type { RunResult } from '#src/schemas/run.js'

/** A whole result, as a run ends with (stores that check what they read back take nothing less), and any change. */
export const runResult = (fields: Partial<RunResult> = {}): RunResult => ({
  agent_report: null,
  changes: null,
  command: ['crush', 'run', '--', 'x'],
  duration_ms: 12,
  error: null,
  exit_code: 0,
  ok: true,
  output: 'done',
  output_bytes: 4,
  output_truncated: false,
  processes_may_remain: false,
  session_id: null,
  signal: null,
  steps_summary: null,
  stop_reason: null,
  structured_output: null,
  sudo: { status: 'passwordless', password_needed: false, message: null },
  timed_out: false,
  tool: 'crush_run',
  usage: null,
  ...fields
})

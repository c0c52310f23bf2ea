import { isObject, parseObject, textOf as text } from './json-values.js'
import type { ParsedReport } from './report.js'
import type { AgentSpec } from './spec.js'
import { geminiSteps } from './steps/gemini.js'

/**
 * `--output-format json`: one JSON object, pretty-printed, after whatever gemini said first ("YOLO mode is enabled…");
 * on failure it goes to stderr with an `error` ({type, message, code}) and gemini exits with that code (41: no auth).
 * The object starts at the last line that opens one.
 */
function parseJsonReport(output: string): ParsedReport | null {
  const newline = output.lastIndexOf('\n{')
  const start = newline >= 0 ? newline + 1 : output.startsWith('{') ? 0 : -1
  if (start < 0) return null
  const report = parseObject(output.slice(start).trim())
  if (report === undefined || !('response' in report || 'error' in report)) return null
  const error = isObject(report['error']) ? report['error'] : undefined
  return {
    text: text(report['response']) ?? text(error?.['message']) ?? '',
    report: { is_error: error !== undefined, subtype: text(error?.['type']), session_id: text(report['session_id']) }
  }
}

/**
 * `--output-format stream-json`, followed live: one event per line; the answer is the assistant's `message` deltas and
 * the last `result` event says how it ended (`status`, and `error` when it failed).
 */
function parseStreamReport(output: string): ParsedReport | null {
  let answer = ''
  let result: Record<string, unknown> | undefined
  let sessionId: string | undefined
  for (const line of output.split('\n')) {
    const event = line.startsWith('{"type":') ? parseObject(line) : undefined
    if (event === undefined) continue
    if (event['type'] === 'init') sessionId = text(event['session_id'])
    if (event['type'] === 'message' && event['role'] === 'assistant') answer += text(event['content']) ?? ''
    if (event['type'] === 'result') result = event
  }
  if (result === undefined) return null
  const error = isObject(result['error']) ? result['error'] : undefined
  return {
    text: answer !== '' ? answer : text(error?.['message']) ?? '',
    report: { is_error: result['status'] !== 'success', subtype: text(error?.['type']), session_id: sessionId }
  }
}

export const parseGeminiReport = (output: string): ParsedReport | null =>
  parseStreamReport(output) ?? parseJsonReport(output)

/**
 * Gemini CLI headless. The task goes as `--prompt=<task>`, one argv element that yargs reads as the option's value
 * whatever it starts with (a separate `-p <task>` would read a task starting with `-` as another option). Tools are
 * approved with `--approval-mode=yolo`, which gemini quietly downgrades in a folder it does not trust: `--skip-trust`.
 */
export const gemini: AgentSpec<'gemini'> = {
  agent: 'gemini',
  defaultBin: 'gemini',
  env: ['GEMINI_*', 'GOOGLE_*'],
  summary: 'Run a task with Gemini CLI headless (`gemini --prompt`)',
  description:
    'Runs `gemini --prompt=<task> --output-format json --approval-mode=yolo --skip-trust` in `cwd`, at most ' +
    '`timeout` seconds, and answers with the `response` of its JSON report as `output` (its error message when it ' +
    'failed) and whether it failed as `agent_report`. Waits for the whole run: up to 30 minutes.',
  args: (task, live, settings) => [
    `--prompt=${task}`,
    '--output-format', live ? 'stream-json' : 'json',
    '--approval-mode=yolo',
    '--skip-trust',
    ...settings.extraArgs
  ],
  parseReport: parseGeminiReport,
  steps: geminiSteps
}

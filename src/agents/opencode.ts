import { OPENCODE_SESSION } from './session-ids.js'
import { isObject, parseObject, textOf as text } from './json-values.js'
import type { ParsedReport } from './report.js'
import type { AgentSpec } from './spec.js'
import { opencodeSteps } from './steps/opencode.js'

/**
 * `opencode run --format json` prints one event per line, `{type, timestamp, sessionID, …}`: `step_start`,
 * `tool_use`, `text` (a finished text part, in `part.text`), `step_finish`, and `error` (`error.data.message`, or its
 * `name`). The answer is its text parts; any error event makes the report an error (opencode then exits 1).
 */
export function parseOpencodeReport(output: string): ParsedReport | null {
  let sessionId: string | undefined
  const texts: string[] = []
  const errors: string[] = []
  for (const line of output.split('\n')) {
    const event = line.startsWith('{"type":') ? parseObject(line) : undefined
    if (event === undefined) continue
    sessionId ??= text(event['sessionID'])
    const part = isObject(event['part']) ? event['part'] : undefined
    if (event['type'] === 'text' && part !== undefined) texts.push(text(part['text']) ?? '')
    if (event['type'] === 'error') {
      const error = isObject(event['error']) ? event['error'] : {}
      const data = isObject(error['data']) ? error['data'] : {}
      errors.push(text(data['message']) ?? text(error['name']) ?? 'error')
    }
  }
  if (sessionId === undefined) return null
  return {
    text: errors.length > 0 ? errors.join('\n') : texts.join('\n'),
    report: { is_error: errors.length > 0, subtype: errors.length > 0 ? 'error' : undefined, session_id: sessionId }
  }
}

/**
 * opencode, non-interactive: `opencode run`. Without `--auto` it rejects every permission its tools ask for. The task
 * is its piped standard input, read byte for byte (1.18.33): as words, opencode would wrap each one holding a space in
 * double quotes.
 */
export const opencode: AgentSpec<'opencode'> = {
  agent: 'opencode',
  defaultBin: 'opencode',
  env: [
    'OPENCODE_*', 'ANTHROPIC_*', 'OPENAI_*', 'AZURE_*', 'GEMINI_*', 'GOOGLE_*', 'VERTEX_*', 'AWS_*', 'OPENROUTER_*',
    'GROQ_*', 'CEREBRAS_*', 'HF_*', 'XAI_*', 'DEEPSEEK_*', 'MISTRAL_*', 'GITHUB_TOKEN'
  ],
  summary: 'Run a task with opencode (`opencode run`)',
  description:
    'Runs `opencode run --format json --auto` with the task on its standard input, in `cwd`, at most `timeout` ' +
    'seconds, and answers with its text parts as `output` (its errors’ messages when it failed) and whether it ' +
    'failed as `agent_report`. Waits for the whole run: up to 30 minutes.',
  // A session continued from another directory than its own hangs opencode 1.18.33: the launcher holds it there.
  args: (settings, session) => [
    'run', '--format', 'json', '--auto', ...settings.extraArgs,
    ...(session === undefined ? [] : [`--session=${session}`])
  ],
  resumes: { sessionId: OPENCODE_SESSION },
  parseReport: parseOpencodeReport,
  steps: opencodeSteps
}

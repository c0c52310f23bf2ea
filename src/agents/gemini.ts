import { UUID } from './session-ids.js'
import type { AgentSpec } from './spec.js'
import { geminiSteps } from './steps/gemini.js'

/**
 * Gemini CLI headless. With no `--prompt` and a piped standard input, gemini runs headless with what it read there
 * as the prompt, byte for byte (0.61.0). Tools are approved with `--approval-mode=yolo`, which gemini quietly
 * downgrades in a folder it does not trust: `--skip-trust`.
 */
export const gemini: AgentSpec<'gemini'> = {
  agent: 'gemini',
  defaultBin: 'gemini',
  env: ['GEMINI_*', 'GOOGLE_*'],
  summary: 'Run a task with Gemini CLI headless',
  description:
    'Runs `gemini --output-format stream-json --approval-mode=yolo --skip-trust` with the task on its standard ' +
    'input, in `cwd`, at most ' +
    '`timeout` seconds, and answers with its answer as `output` (its error message when it failed) and whether it ' +
    'failed as `agent_report`. Waits for the whole run: up to 30 minutes.',
  // stream-json in every run, followed or not: json mode's one report tells none of the tool calls the steps are.
  args: (settings, session) => [
    '--output-format', 'stream-json',
    '--approval-mode=yolo',
    '--skip-trust',
    ...settings.extraArgs,
    // Its session by id, joined to the flag: gemini reads a number there as an index, "latest" as the newest. It keeps
    // sessions per directory: a session continues in its own (the launcher holds it there).
    ...(session === undefined ? [] : [`--resume=${session}`])
  ],
  resumes: { sessionId: UUID },
  steps: geminiSteps
}

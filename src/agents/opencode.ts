import { OPENCODE_SESSION } from './session-ids.js'
import type { AgentSpec } from './spec.js'
import { opencodeSteps } from './steps/opencode.js'

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
  steps: opencodeSteps
}

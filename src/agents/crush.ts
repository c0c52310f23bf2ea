import type { AgentSpec } from './spec.js'
import { crushSteps } from './steps/crush.js'

/** Crush (charmbracelet): `crush run` approves its own tools in non-interactive mode and traps only SIGINT. */
export const crush: AgentSpec<'crush'> = {
  agent: 'crush',
  defaultBin: 'crush',
  env: [
    'CRUSH_*', 'ANTHROPIC_*', 'OPENAI_*', 'AZURE_OPENAI_*', 'GEMINI_*', 'GOOGLE_*', 'VERTEXAI_*', 'AWS_*',
    'OPENROUTER_*', 'GROQ_*', 'CEREBRAS_*', 'HF_*', 'XAI_*'
  ],
  summary: 'Run a task with Crush (`crush run`)',
  description:
    'Runs `crush run -- <task>` (Crush approves its own tools in `run` mode) in `cwd`, at most `timeout` seconds, ' +
    'and answers with its exit and its output. Waits for the whole run: up to 30 minutes.',
  args: (settings) => ['run', ...settings.extraArgs],
  // crush reads a piped prompt as `<stdin>\n\n<words>`, never byte for byte: the task stays a word, after `--`, which
  // ends cobra's flags (it is the prompt, whatever it starts with).
  taskInArgv: (task) => ['--', task],
  steps: crushSteps
}

import { message } from './steps/step-text.js'
import { modelOption, type AgentSpec, type StepParser } from './spec.js'

/**
 * Crush prints plain text, no events: all it says of what it does is its text, read as a message per line as it
 * comes (a paragraph would wait for its blank line; a caller following the run sees each line when it is printed).
 */
function crushSteps(): StepParser {
  return {
    readsText: true,
    read: (line) => {
      const text = String(line).replace(/\r$/, '')
      return text.trim() === '' ? [] : [message(text)]
    },
    session: () => null
  }
}

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
  // `crush run --model`: a model, or `provider/model` where providers share a name; before the `--` ending its flags.
  args: (settings, _session, model) => ['run', ...settings.extraArgs, ...modelOption('--model', model)],
  // crush reads a piped prompt as `<stdin>\n\n<words>`, never byte for byte: the task stays a word, after `--`, which
  // ends cobra's flags (it is the prompt, whatever it starts with).
  taskInArgv: (task) => ['--', task],
  steps: crushSteps
}

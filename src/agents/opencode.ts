import { OPENCODE_SESSION } from './session-ids.js'
import type { Step } from '../schemas/steps.js'
import { isObject, textOf } from './json-values.js'
import { startedAndCompleted, type Call, type CallEnd } from './steps/calls.js'
import { answerWith, count, failure, message, summarise, usage } from './steps/step-text.js'
import { modelOption, type AgentSpec, type StepParser } from './spec.js'

/** What opencode answers a call a permission rule refused. */
const DENIED = /rejected permission|rule which prevents/

function callOf(tool: string, input: Record<string, unknown>, metadata: Record<string, unknown>): Call {
  if (tool === 'bash') return { kind: 'command', command: textOf(input['command']) ?? '' }
  // Two generations of its file tools: `filePath` (and `exists`), or `path` (and `existed`).
  const path = textOf(input['filePath']) ?? textOf(input['path'])
  if (path !== undefined && (tool === 'edit' || tool === 'write')) {
    const existed = metadata['exists'] ?? metadata['existed']
    const change = tool === 'edit' || existed === true ? 'edited' : existed === false ? 'created' : null
    return { kind: 'file_change', tool, path, change }
  }
  return { kind: 'tool', name: tool, input: summarise(input) }
}

/**
 * opencode's `run --format json`: a text part once finished, a tool part only once it has ended (so each call's
 * start comes with its end), each model step's tokens and cost at its end (to be added up).
 */
export function opencodeSteps(): StepParser {
  let session: string | null = null
  // Its report: the first session it names, its text parts and its errors, each list joined by lines.
  let reportedSession: string | undefined
  let answer: string | undefined
  let errors: string | undefined
  const joined = (list: string | undefined, more: string): string =>
    answerWith(list === undefined ? '' : `${list}\n`, more)
  const toolUse = (part: Record<string, unknown>): Step[] => {
    const state = isObject(part['state']) ? part['state'] : {}
    const metadata = isObject(state['metadata']) ? state['metadata'] : {}
    const call = callOf(textOf(part['tool']) ?? '', isObject(state['input']) ? state['input'] : {}, metadata)
    const error = textOf(state['error'])
    const end: CallEnd = {
      status: state['status'] === 'completed' ? 'succeeded' : DENIED.test(error ?? '') ? 'denied' : 'failed',
      exitCode: count(metadata['exit']),
      output: textOf(state['output']) ?? error ?? null
    }
    return startedAndCompleted(call, textOf(part['callID']) ?? textOf(part['id']) ?? '', end)
  }
  return {
    read: (event) => {
      if (!isObject(event)) return []
      session = textOf(event['sessionID']) ?? session
      reportedSession ??= textOf(event['sessionID'])
      const part = isObject(event['part']) ? event['part'] : {}
      switch (event['type']) {
        case 'text':
          answer = joined(answer, textOf(part['text']) ?? '')
          return [message(textOf(part['text']) ?? '')]
        case 'tool_use':
          return toolUse(part)
        case 'step_finish': {
          const tokens = isObject(part['tokens']) ? part['tokens'] : {}
          return [usage({ input: tokens['input'], output: tokens['output'], cost: part['cost'] }, false)]
        }
        case 'error': {
          const error = isObject(event['error']) ? event['error'] : {}
          const data = isObject(error['data']) ? error['data'] : {}
          const said = textOf(data['message']) ?? textOf(error['name']) ?? 'error'
          errors = joined(errors, said)
          return [failure(said, true)]
        }
        default:
          return []
      }
    },
    session: () => session,
    // Any error event makes the report an error (opencode then exits 1).
    report: () => reportedSession === undefined
      ? null
      : {
          text: errors ?? answer ?? '',
          report: {
            is_error: errors !== undefined,
            subtype: errors === undefined ? undefined : 'error',
            session_id: reportedSession
          }
        }
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
  args: (settings, session, model) => [
    'run', '--format', 'json', '--auto', ...settings.extraArgs,
    // opencode names a model `provider/model`.
    ...modelOption('--model', model),
    ...(session === undefined ? [] : [`--session=${session}`])
  ],
  // Each step_finish says what its model call cost: 0 for a model opencode has no price for (MODEL_PRICES_FILE's wins).
  reportsCost: true,
  resumes: { sessionId: OPENCODE_SESSION },
  steps: opencodeSteps
}

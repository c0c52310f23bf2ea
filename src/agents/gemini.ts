import { UUID } from './session-ids.js'
import type { Step } from '../schemas/steps.js'
import { isObject, textOf } from './json-values.js'
import { OpenCalls, type Call } from './steps/calls.js'
import { answerWith, failure, head, message, summarise, usage } from './steps/step-text.js'
import { modelOption, type AgentSpec, type ParsedReport, type StepParser } from './spec.js'
import { modelUsed } from './models.js'

function callOf(name: string, parameters: Record<string, unknown>): Call {
  if (name === 'run_shell_command') return { kind: 'command', command: textOf(parameters['command']) ?? '' }
  const path = textOf(parameters['file_path'])
  // write_file creates or replaces, and gemini does not say which.
  if (path !== undefined && (name === 'replace' || name === 'write_file')) {
    return { kind: 'file_change', tool: name, path, change: name === 'replace' ? 'edited' : null }
  }
  return { kind: 'tool', name, input: summarise(parameters) }
}

/**
 * Gemini CLI's stream-json: the answer comes as `message` deltas (merged into one message step until something else
 * comes), each tool as `tool_use` then `tool_result` under one tool_id. Its shell tool shows an exit code only when
 * the command printed nothing (`Command exited with code: N`): otherwise the code is unknown.
 */
export function geminiSteps(): StepParser {
  const calls = new OpenCalls()
  let text = ''
  let session: string | null = null
  // Its report: the assistant's deltas joined, and how the last `result` event says it ended.
  let answer = ''
  let ended: Record<string, unknown> | undefined
  // The model its `init` event says it runs with (`auto…` when it routes each request).
  let announced: string | undefined
  const flush = (): Step[] => {
    if (text === '') return []
    const merged = message(text)
    text = ''
    return [merged]
  }
  const read = (event: Record<string, unknown>): Step[] => {
    switch (event['type']) {
      case 'tool_use': {
        const parameters = isObject(event['parameters']) ? event['parameters'] : {}
        return [calls.open(textOf(event['tool_id']) ?? '', callOf(textOf(event['tool_name']) ?? '', parameters))]
      }
      case 'tool_result': {
        const error = isObject(event['error']) ? event['error'] : undefined
        const output = textOf(event['output']) ?? textOf(error?.['message']) ?? null
        const exitCode = Number(/^Command exited with code: (\d+)$/.exec(output ?? '')?.[1] ?? NaN)
        const denied = error?.['type'] === 'policy_violation'
        return calls.close(textOf(event['tool_id']) ?? '', {
          status: denied ? 'denied' : event['status'] === 'success' ? 'succeeded' : 'failed',
          exitCode: Number.isNaN(exitCode) ? null : exitCode,
          output
        })
      }
      case 'init':
        session = textOf(event['session_id']) ?? session
        announced = textOf(event['model'])
        return []
      case 'error':
        return [failure(textOf(event['message']) ?? '', event['severity'] === 'error')]
      case 'result': {
        ended = event
        const stats = isObject(event['stats']) ? event['stats'] : {}
        const models = isObject(stats['models']) ? Object.keys(stats['models']) : []
        const totals = usage({
          input: stats['input_tokens'], output: stats['output_tokens'], model: modelUsed(models, announced)
        }, true)
        if (event['status'] !== 'error') return [totals]
        const error = isObject(event['error']) ? event['error'] : {}
        return [totals, failure(textOf(error['message']) ?? 'error', true)]
      }
      default:
        return []
    }
  }
  return {
    read: (event) => {
      if (!isObject(event)) return []
      if (event['type'] === 'message') {
        // The user's own prompt is echoed first: not a step.
        if (event['role'] === 'assistant') {
          const delta = textOf(event['content']) ?? ''
          text = head(text + delta, 65536).text
          answer = answerWith(answer, delta)
        }
        return []
      }
      return [...flush(), ...read(event)]
    },
    end: flush,
    session: () => session,
    // A failure before the run began (no auth: exit 41) is plain text on stderr, with no event: no report then.
    report: (): ParsedReport | null => {
      if (ended === undefined) return null
      const error = isObject(ended['error']) ? ended['error'] : undefined
      return {
        text: answer !== '' ? answer : textOf(error?.['message']) ?? '',
        report: {
          is_error: ended['status'] !== 'success',
          subtype: textOf(error?.['type']),
          session_id: session ?? undefined
        }
      }
    }
  }
}

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
  args: (settings, session, model) => [
    '--output-format', 'stream-json',
    '--approval-mode=yolo',
    '--skip-trust',
    ...settings.extraArgs,
    ...modelOption('--model', model),
    // Its session by id, joined to the flag: gemini reads a number there as an index, "latest" as the newest. It keeps
    // sessions per directory: a session continues in its own (the launcher holds it there).
    ...(session === undefined ? [] : [`--resume=${session}`])
  ],
  resumes: { sessionId: UUID },
  steps: geminiSteps
}

import type { Step } from '../../schemas/steps.js'
import { isObject, textOf } from '../json-values.js'
import type { StepParser } from '../spec.js'
import { OpenCalls, type Call } from './calls.js'
import { failure, message, summarise, usage } from './step-text.js'

const EDITS = new Set(['Edit', 'MultiEdit', 'NotebookEdit'])

function callOf(name: string, input: Record<string, unknown>): Call {
  if (name === 'Bash') return { kind: 'command', command: textOf(input['command']) ?? '' }
  const path = textOf(input['file_path']) ?? textOf(input['notebook_path'])
  // Write creates or replaces: which one, only its end says.
  if (path !== undefined && (EDITS.has(name) || name === 'Write')) {
    return { kind: 'file_change', tool: name, path, change: name === 'Write' ? null : 'edited' }
  }
  return { kind: 'tool', name, input: summarise(input) }
}

/** A tool_result's text: a string, or text blocks. */
function resultText(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content.map((block) => (isObject(block) ? (textOf(block['text']) ?? '') : '')).join('')
}

/**
 * Claude Code's stream-json: `assistant` lines carry text and tool_use blocks, `user` lines the tool_results (same
 * id), `system` lines denials and retries, the `result` line the run's usage. A failed Bash comes back as an error
 * result whose text starts `Exit code N`; a clean one means 0.
 */
export function claudeSteps(): StepParser {
  const calls = new OpenCalls()
  let session: string | null = null
  const assistant = (event: Record<string, unknown>): Step[] => {
    const content = isObject(event['message']) ? event['message']['content'] : undefined
    const steps: Step[] = Array.isArray(content)
      ? content.flatMap((block): Step[] => {
        if (!isObject(block)) return []
        if (block['type'] === 'text') return [message(textOf(block['text']) ?? '')]
        if (block['type'] !== 'tool_use') return []
        const input = isObject(block['input']) ? block['input'] : {}
        return [calls.open(textOf(block['id']) ?? '', callOf(textOf(block['name']) ?? '', input))]
      })
      : []
    const error = textOf(event['error'])
    return error === undefined ? steps : [...steps, failure(error, false)]
  }
  const user = (event: Record<string, unknown>): Step[] => {
    const content = isObject(event['message']) ? event['message']['content'] : undefined
    if (!Array.isArray(content)) return []
    const report = isObject(event['tool_use_result']) ? event['tool_use_result'] : {}
    return content.flatMap((block): Step[] => {
      if (!isObject(block) || block['type'] !== 'tool_result') return []
      const text = resultText(block['content'])
      const failed = block['is_error'] === true
      // A code claude judged no failure (`test` answering 1: "Condition is false") is not 0, and it does not say it.
      const interpreted = typeof report['returnCodeInterpretation'] === 'string'
      const exitCode = failed ? Number(/^Exit code (\d+)/.exec(text)?.[1] ?? NaN) : interpreted ? NaN : 0
      const written = report['type'] === 'create' ? 'created' : report['type'] === 'update' ? 'edited' : undefined
      return calls.close(textOf(block['tool_use_id']) ?? '', {
        status: failed ? 'failed' : 'succeeded',
        exitCode: Number.isNaN(exitCode) ? null : exitCode,
        output: text,
        ...(written === undefined ? {} : { change: written })
      })
    })
  }
  const system = (event: Record<string, unknown>): Step[] => {
    if (event['subtype'] === 'permission_denied') {
      return calls.close(textOf(event['tool_use_id']) ?? '', { status: 'denied' })
    }
    if (event['subtype'] === 'api_retry') return [failure(`API retry: ${textOf(event['error']) ?? 'error'}`, false)]
    return []
  }
  const result = (event: Record<string, unknown>): Step[] => {
    const tokens = isObject(event['usage']) ? event['usage'] : {}
    const models = isObject(event['modelUsage']) ? Object.keys(event['modelUsage']) : []
    const steps: Step[] = [usage({
      input: tokens['input_tokens'],
      output: tokens['output_tokens'],
      cost: event['total_cost_usd'],
      model: models.length === 1 ? models[0] : null
    }, true)]
    if (event['is_error'] !== true) return steps
    const errors = Array.isArray(event['errors']) ? event['errors'].filter((each) => typeof each === 'string') : []
    return [...steps, failure(errors.join('\n') || (textOf(event['result']) ?? textOf(event['subtype']) ?? ''), true)]
  }
  return {
    read: (event) => {
      if (!isObject(event)) return []
      session = textOf(event['session_id']) ?? session
      if (event['type'] === 'assistant') return assistant(event)
      if (event['type'] === 'user') return user(event)
      if (event['type'] === 'system') return system(event)
      if (event['type'] === 'result') return result(event)
      return []
    },
    session: () => session
  }
}

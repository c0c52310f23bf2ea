import { UUID } from './session-ids.js'
import { Type } from '@sinclair/typebox'
import type { LimitReason } from '../schemas/limits.js'
import type { Step } from '../schemas/steps.js'
import { isObject, textOf } from './json-values.js'
import { OpenCalls, startedAndCompleted, type Call } from './steps/calls.js'
import { failure, message, summarise, usage } from './steps/step-text.js'
import { modelOption, type AgentSpec, type ParsedReport, type StepParser } from './spec.js'
import { modelUsed } from './models.js'

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

/** A number as the answer can carry it: absent when it is no number, null when JSON could not write it back. */
function optionalNumber(value: unknown, integer = false): number | null | undefined {
  if (typeof value !== 'number') return undefined
  const number = integer ? Math.trunc(value) : value
  return Number.isFinite(number) && (!integer || Number.isSafeInteger(number)) ? number : null
}

/** The result subtypes of a run claude stopped at a limit it was given (2.1.332). */
const LIMIT_SUBTYPES = new Map<string, LimitReason>([
  ['error_max_turns', 'max_turns'], ['error_max_budget_usd', 'max_cost']
])

/** Claude's report is its `result` line (stream-json's last, json mode's only one): the last such line is the one. */
function reportOf(event: Record<string, unknown>): ParsedReport | null {
  if (typeof event['is_error'] !== 'boolean') return null
  const limit = LIMIT_SUBTYPES.get(textOf(event['subtype']) ?? '')
  return {
    ...(limit === undefined ? {} : { limit }),
    text: textOf(event['result']) ?? '',
    report: {
      is_error: event['is_error'],
      subtype: textOf(event['subtype']),
      session_id: textOf(event['session_id']),
      num_turns: optionalNumber(event['num_turns'], true),
      total_cost_usd: optionalNumber(event['total_cost_usd']),
      duration_ms: optionalNumber(event['duration_ms']),
      duration_api_ms: optionalNumber(event['duration_api_ms'])
    }
  }
}

/** Ended calls remembered at once, at most: enough for any run's denials, never a map that grows for good. */
const ENDED_MAX = 4096

/** A tool_result's text: a string, or text blocks. */
function resultText(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content.map((block) => (isObject(block) ? (textOf(block['text']) ?? '') : '')).join('')
}

/** Whether a user line's `tool_result_meta` says claude refused the call (any mode, any rule: `decision: reject`). */
function refused(event: Record<string, unknown>, callId: string): boolean {
  const meta = Array.isArray(event['tool_result_meta']) ? event['tool_result_meta'] : []
  return meta.some((entry) =>
    isObject(entry) && entry['id'] === callId &&
    isObject(entry['permission_decision']) && entry['permission_decision']['decision'] === 'reject')
}

/**
 * Claude Code's stream-json: `assistant` lines carry text and tool_use blocks, `user` lines the tool_results (same
 * id), `system` lines denials and retries, the `result` line the run's usage and its `permission_denials`. A failed
 * Bash comes back as an error result whose text starts `Exit code N`; a clean one means 0.
 *
 * A refused call (2.1.332, in dontAsk, default and plan alike): a `system` `permission_denied` line, then an error
 * tool_result whose `tool_result_meta` says `reject`, and the `result` line lists it in `permission_denials`. Each of
 * the three ends it denied, once: the tool_result's meta so that a refusal is never read as a failure should the
 * system line not come first, the result line because it has the last word on a call no line ended.
 */
export function claudeSteps(): StepParser {
  const calls = new OpenCalls()
  // Ids of the calls that ended: a denial the result line repeats is not counted twice.
  const ended = new Set<string>()
  const end = (callId: string, steps: Step[]): Step[] => {
    if (steps.length === 0) return steps
    ended.add(callId)
    if (ended.size > ENDED_MAX) ended.delete(ended.values().next().value!)
    return steps
  }
  let session: string | null = null
  let report: ParsedReport | null = null
  // The model its `system` `init` line says the session runs with.
  let announced: string | undefined
  // The message whose usage was last told: claude prints each block of a response as a line of its own, each with
  // the response's usage.
  let toldUsageOf: string | undefined
  const responseUsage = (response: Record<string, unknown>): Step[] => {
    const id = textOf(response['id'])
    if (id === undefined || id === toldUsageOf || !isObject(response['usage'])) return []
    toldUsageOf = id
    const tokens = response['usage']
    // As the response began: its output tokens are those of its first block only; the result line has the totals.
    const model = textOf(response['model'])
    return [usage({ input: tokens['input_tokens'], output: tokens['output_tokens'], model }, false)]
  }
  const assistant = (event: Record<string, unknown>): Step[] => {
    const response = isObject(event['message']) ? event['message'] : {}
    const content = response['content']
    const blocks: Step[] = Array.isArray(content)
      ? content.flatMap((block): Step[] => {
        if (!isObject(block)) return []
        if (block['type'] === 'text') return [message(textOf(block['text']) ?? '')]
        if (block['type'] !== 'tool_use') return []
        const input = isObject(block['input']) ? block['input'] : {}
        return [calls.open(textOf(block['id']) ?? '', callOf(textOf(block['name']) ?? '', input))]
      })
      : []
    const steps = [...blocks, ...responseUsage(response)]
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
      const callId = textOf(block['tool_use_id']) ?? ''
      if (refused(event, callId)) return end(callId, calls.close(callId, { status: 'denied', output: text }))
      const failed = block['is_error'] === true
      // A code claude judged no failure (`test` answering 1: "Condition is false") is not 0, and it does not say it.
      const interpreted = typeof report['returnCodeInterpretation'] === 'string'
      const exitCode = failed ? Number(/^Exit code (\d+)/.exec(text)?.[1] ?? NaN) : interpreted ? NaN : 0
      const written = report['type'] === 'create' ? 'created' : report['type'] === 'update' ? 'edited' : undefined
      return end(callId, calls.close(callId, {
        status: failed ? 'failed' : 'succeeded',
        exitCode: Number.isNaN(exitCode) ? null : exitCode,
        output: text,
        ...(written === undefined ? {} : { change: written })
      }))
    })
  }
  const system = (event: Record<string, unknown>): Step[] => {
    if (event['subtype'] === 'permission_denied') {
      const callId = textOf(event['tool_use_id']) ?? ''
      return end(callId, calls.close(callId, { status: 'denied', output: textOf(event['message']) ?? null }))
    }
    if (event['subtype'] === 'api_retry') return [failure(`API retry: ${textOf(event['error']) ?? 'error'}`, false)]
    if (event['subtype'] === 'init') announced = textOf(event['model'])
    return []
  }
  /** A denial the result line lists: the call ends denied, unless a line already ended it. */
  const denial = (entry: unknown): Step[] => {
    if (!isObject(entry)) return []
    const callId = textOf(entry['tool_use_id']) ?? ''
    if (callId === '' || ended.has(callId)) return []
    const closed = calls.close(callId, { status: 'denied' })
    if (closed.length > 0) return end(callId, closed)
    // A call no line started (or one forgotten): the denial says what it was.
    const call = callOf(textOf(entry['tool_name']) ?? '', isObject(entry['tool_input']) ? entry['tool_input'] : {})
    return end(callId, startedAndCompleted(call, callId, { status: 'denied' }))
  }
  const result = (event: Record<string, unknown>): Step[] => {
    const denials = Array.isArray(event['permission_denials']) ? event['permission_denials'].flatMap(denial) : []
    const tokens = isObject(event['usage']) ? event['usage'] : {}
    const models = isObject(event['modelUsage']) ? Object.keys(event['modelUsage']) : []
    const steps: Step[] = [...denials, usage({
      input: tokens['input_tokens'],
      output: tokens['output_tokens'],
      cost: event['total_cost_usd'],
      model: modelUsed(models, announced)
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
      if (event['type'] === 'result') {
        report = reportOf(event) ?? report
        return result(event)
      }
      return []
    },
    session: () => session,
    report: () => report
  }
}

const CLAUDE_PERMISSION_MODES = [
  'acceptEdits', 'auto', 'bypassPermissions', 'default', 'dontAsk', 'plan'
] as const

/** Claude Code headless: `claude -p`, its JSON report parsed into the answer and `agent_report`. */
export const claude: AgentSpec<'claude'> = {
  agent: 'claude',
  defaultBin: 'claude',
  env: ['ANTHROPIC_*', 'CLAUDE_*', 'CLOUD_ML_*', 'VERTEX_*', 'GOOGLE_*', 'AWS_*', 'DISABLE_*', 'MCP_*', 'IS_SANDBOX'],
  summary: 'Run a task with Claude Code headless (`claude -p`)',
  description:
    'Runs `claude -p --output-format stream-json --verbose --permission-mode <CLAUDE_PERMISSION_MODE>` with the task ' +
    'on its standard input, in `cwd`, at most `timeout` seconds, and answers with the answer text of its final ' +
    'report as `output` and the rest as `agent_report`. Waits for the whole run: up to 30 minutes.',
  ownSettings: {
    CLAUDE_PERMISSION_MODE: Type.Union(
      CLAUDE_PERMISSION_MODES.map((mode) => Type.Literal(mode)),
      { default: 'bypassPermissions' }
    )
  },
  // stream-json in every run, followed or not: its tool calls are the result's steps, which json mode's one final
  // report never tells (that report is stream-json's last line, the `result` line parseClaudeReport reads).
  // With no prompt among its words, `claude -p` reads it from standard input, byte for byte (2.1.332).
  args: (settings, session, model) => [
    '-p',
    '--output-format', 'stream-json', '--verbose',
    '--permission-mode', settings.own['CLAUDE_PERMISSION_MODE']!,
    ...settings.extraArgs,
    // After the operator's options: the run's model is the one it asked for.
    ...modelOption('--model', model),
    // --resume takes an optional value: joined to it, the id is never read as anything else, nor the flag without it.
    ...(session === undefined ? [] : [`--resume=${session}`])
  ],
  // Joined to their flags, as the model is. Claude then ends the run itself, its result's subtype saying which.
  limitArgs: (limits) => [
    ...(limits.max_turns === undefined ? [] : [`--max-turns=${limits.max_turns}`]),
    ...(limits.max_cost_usd === undefined ? [] : [`--max-budget-usd=${limits.max_cost_usd}`])
  ],
  reportsCost: true,
  resumes: { sessionId: UUID },
  steps: claudeSteps,
  // Claude Code refuses to skip its permission prompts as root (containers, CI), unless told it is in a sandbox. What
  // counts is who the agent runs as: a root service with AGENT_USER runs it as that user, and it works.
  problem: (settings, env, agentUid) =>
    agentUid === 0 &&
    settings.own['CLAUDE_PERMISSION_MODE'] === 'bypassPermissions' &&
    env['IS_SANDBOX'] !== '1'
      ? 'claude refuses CLAUDE_PERMISSION_MODE=bypassPermissions when run as root: set AGENT_USER (or run the ' +
        'service as another user), ' +
        'set CLAUDE_PERMISSION_MODE (e.g. acceptEdits), or IS_SANDBOX=1 if the service runs in a sandbox'
      : null
}

import { UUID } from './session-ids.js'
import { Type } from '@sinclair/typebox'
import type { Step } from '../schemas/steps.js'
import { isObject, textOf } from './json-values.js'
import { completed, started, type Call, type CallEnd } from './steps/calls.js'
import { count, failure, message, summarise, usage as reportedUsage } from './steps/step-text.js'
import { modelOption, type AgentSpec, type StepParser } from './spec.js'

type Change = 'created' | 'edited' | 'deleted'
const CHANGES: Record<string, Change> = { add: 'created', update: 'edited', delete: 'deleted' }
const changeOf = (kind: unknown): Change | null =>
  typeof kind === 'string' && Object.hasOwn(CHANGES, kind) ? CHANGES[kind]! : null

function statusOf(status: unknown): CallEnd['status'] {
  if (status === 'declined') return 'denied'
  return status === 'completed' ? 'succeeded' : 'failed'
}

/** The calls one item stands for: a command, each file of a patch, an MCP tool, a web search. */
function callsOf(item: Record<string, unknown>): Call[] {
  switch (item['type']) {
    case 'command_execution':
      return [{ kind: 'command', command: textOf(item['command']) ?? '' }]
    case 'file_change':
      return (Array.isArray(item['changes']) ? item['changes'] : []).filter(isObject).map((change) => ({
        kind: 'file_change',
        tool: 'apply_patch',
        path: textOf(change['path']) ?? '',
        change: changeOf(change['kind'])
      }))
    case 'mcp_tool_call':
      return [{
        kind: 'tool',
        name: `${textOf(item['server']) ?? ''}/${textOf(item['tool']) ?? ''}`,
        input: summarise(item['arguments'])
      }]
    case 'web_search':
      return [{ kind: 'tool', name: 'web_search', input: summarise({ query: item['query'] }) }]
    default:
      return []
  }
}

/**
 * Codex's `exec --json` ThreadEvents: each item (a command, a patch, a tool call, a message) starts and completes
 * under one id; a patch is reported only once applied, so its start comes with its end. The turn's usage is the
 * thread's totals so far.
 */
export function codexSteps(): StepParser {
  const startedItems = new Set<string>()
  let session: string | null = null
  // Its report: the last agent message, whether a turn completed, the last error on the way.
  let answer: string | undefined
  let turnCompleted: boolean | undefined
  let lastError: { kind: string; message: string } | undefined
  const item = (phase: 'started' | 'completed', value: Record<string, unknown>): Step[] => {
    const id = textOf(value['id']) ?? ''
    if (value['type'] === 'agent_message') {
      if (phase !== 'completed') return []
      answer = textOf(value['text']) ?? answer
      return [message(answer ?? '')]
    }
    if (value['type'] === 'error') return [failure(textOf(value['message']) ?? '', false)]
    const calls = callsOf(value)
    if (phase === 'started') {
      startedItems.add(id)
      // Items a run never completes cannot grow the set for good.
      if (startedItems.size > 256) startedItems.delete(startedItems.values().next().value!)
      return calls.map((call) => started(call, id))
    }
    const wasStarted = startedItems.delete(id)
    const end: CallEnd = {
      status: statusOf(value['status']),
      exitCode: count(value['exit_code']),
      output: textOf(value['aggregated_output']) ?? null
    }
    return calls.flatMap((call) => [...(wasStarted ? [] : [started(call, id)]), completed(call, id, end)])
  }
  return {
    read: (event) => {
      if (!isObject(event)) return []
      const value = isObject(event['item']) ? event['item'] : undefined
      switch (event['type']) {
        case 'thread.started':
          session = textOf(event['thread_id']) ?? session
          return []
        case 'item.started':
          return value === undefined ? [] : item('started', value)
        case 'item.completed':
          return value === undefined ? [] : item('completed', value)
        case 'turn.completed': {
          turnCompleted = true
          const usage = isObject(event['usage']) ? event['usage'] : {}
          return [reportedUsage({ input: usage['input_tokens'], output: usage['output_tokens'] }, true)]
        }
        case 'turn.failed': {
          const error = isObject(event['error']) ? event['error'] : {}
          turnCompleted = false
          lastError = { kind: 'turn.failed', message: textOf(error['message']) ?? '' }
          return [failure(textOf(error['message']) ?? 'turn failed', true)]
        }
        case 'error':
          lastError = { kind: 'error', message: textOf(event['message']) ?? '' }
          return [failure(textOf(event['message']) ?? '', false)]
        default:
          return []
      }
    },
    session: () => session,
    // `error` events come on the way too ("Reconnecting... 2/5"), fatal only when no completed turn follows.
    report: () => {
      if (session === null && turnCompleted === undefined && lastError === undefined) return null
      const failed = turnCompleted !== true
      return {
        text: failed ? lastError?.message ?? answer ?? '' : answer ?? '',
        report: { is_error: failed, subtype: failed ? lastError?.kind : undefined, session_id: session ?? undefined }
      }
    }
  }
}

const CODEX_SANDBOXES = ['bypass', 'workspace-write', 'read-only'] as const

/**
 * OpenAI Codex CLI, non-interactive: `codex exec`. It refuses to work outside a Git repository unless told to; it never
 * asks for approval in exec mode, and its sandbox is read-only unless set otherwise: CODEX_SANDBOX picks it, `bypass`
 * (the default) working as unattended as `crush run` and claude's bypassPermissions do. Its prompt is `-`, after
 * `--`: "read it from standard input", where the task is, byte for byte (0.171.0).
 */
export const codex: AgentSpec<'codex'> = {
  agent: 'codex',
  defaultBin: 'codex',
  env: ['CODEX_*', 'OPENAI_*', 'AZURE_OPENAI_*'],
  summary: 'Run a task with OpenAI Codex CLI (`codex exec`)',
  description:
    'Runs `codex exec --json --skip-git-repo-check -c allow_login_shell=false ' +
    '--dangerously-bypass-approvals-and-sandbox -- -` ' +
    '(or `--sandbox <CODEX_SANDBOX>`) with the task on its standard input, in `cwd`, at most `timeout` seconds, ' +
    'and answers with its last agent message as `output` (the error’s message when its turn failed) and whether it ' +
    'failed as `agent_report`. Waits for the whole run: up to 30 minutes.',
  ownSettings: {
    CODEX_SANDBOX: Type.Union(CODEX_SANDBOXES.map((mode) => Type.Literal(mode)), { default: 'bypass' })
  },
  args: (settings, session, model) => {
    const sandbox = settings.own['CODEX_SANDBOX']!
    return [
      'exec',
      '--json',
      '--skip-git-repo-check',
      '--color', 'never',
      // codex otherwise runs its commands in a login shell's environment, which re-reads /etc/profile and resets PATH:
      // the service's PATH (its sudo shim first) and the rest of the environment it chose would not reach them.
      '-c', 'allow_login_shell=false',
      ...(sandbox === 'bypass' ? ['--dangerously-bypass-approvals-and-sandbox'] : ['--sandbox', sandbox]),
      ...settings.extraArgs,
      ...modelOption('--model', model),
      // `exec resume` takes fewer flags than `exec` (no --sandbox, no --color): given to `exec` before it, they hold.
      ...(session === undefined ? [] : ['resume', session]),
      '--', '-'
    ]
  },
  resumes: { sessionId: UUID },
  steps: codexSteps
}

import t from 'tap'
import { claudeSteps } from '#src/agents/claude.js'
import { codexSteps } from '#src/agents/codex.js'
import { geminiSteps } from '#src/agents/gemini.js'
import { opencodeSteps } from '#src/agents/opencode.js'
import type { StepParser } from '#src/agents/spec.js'
import { readSteps } from '../helpers/steps.js'

// Each CLI's structured output, shaped as its pinned version prints it (the event shapes read from each CLI's
// package and sources; docs/agents.md), read into the one step vocabulary.

const lines = (...events: unknown[]): string => events.map((event) => `${JSON.stringify(event)}\n`).join('')

const stepsOf = (parser: StepParser, stream: string, cuts: number[] = []) =>
  readSteps(parser, Buffer.from(stream), cuts)

const CLAUDE = lines(
  { type: 'system', subtype: 'init', session_id: 's-1', model: 'claude-x' },
  { type: 'assistant', message: { id: 'm1', content: [{ type: 'text', text: 'Running the tests.' }] } },
  {
    type: 'assistant',
    message: {
      id: 'm1',
      content: [{ type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'npm test', description: 'tests' } }]
    }
  },
  {
    type: 'user',
    message: {
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'Exit code 1\n1 failing', is_error: true }]
    }
  },
  {
    type: 'assistant',
    message: {
      id: 'm2',
      content: [{ type: 'tool_use', id: 'toolu_2', name: 'Write', input: { file_path: '/w/a.ts', content: 'x' } }]
    }
  },
  {
    type: 'user',
    message: {
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: 'toolu_2', content: [{ type: 'text', text: 'File created' }] }]
    },
    tool_use_result: { type: 'create' }
  },
  {
    type: 'assistant',
    message: { id: 'm3', content: [{ type: 'tool_use', id: 'toolu_3', name: 'Grep', input: { pattern: 'TODO' } }] }
  },
  { type: 'system', subtype: 'permission_denied', tool_name: 'Grep', tool_use_id: 'toolu_3' },
  {
    type: 'result',
    subtype: 'success',
    is_error: false,
    session_id: 's-1',
    total_cost_usd: 0.01,
    usage: { input_tokens: 10, output_tokens: 5 },
    modelUsage: { 'claude-x': {} }
  }
)

t.test('claude: text, a failed Bash with its exit code, a Write that created, a denied tool, the usage', async (t) => {
  t.same(stepsOf(claudeSteps(), CLAUDE).steps, [
    { kind: 'message', text: 'Running the tests.', truncated: false },
    {
      kind: 'command',
      phase: 'started',
      call_id: 'toolu_1',
      command: 'npm test',
      status: 'running',
      exit_code: null,
      output: null
    },
    {
      kind: 'command',
      phase: 'completed',
      call_id: 'toolu_1',
      command: 'npm test',
      status: 'failed',
      exit_code: 1,
      output: 'Exit code 1\n1 failing'
    },
    {
      kind: 'file_change',
      tool: 'Write',
      path: '/w/a.ts',
      change: null,
      phase: 'started',
      call_id: 'toolu_2',
      status: 'running'
    },
    {
      kind: 'file_change',
      tool: 'Write',
      path: '/w/a.ts',
      change: 'created',
      phase: 'completed',
      call_id: 'toolu_2',
      status: 'succeeded'
    },
    { kind: 'tool', name: 'Grep', input: 'TODO', phase: 'started', call_id: 'toolu_3', status: 'running' },
    { kind: 'tool', name: 'Grep', input: 'TODO', phase: 'completed', call_id: 'toolu_3', status: 'denied' },
    { kind: 'usage', input_tokens: 10, output_tokens: 5, cost_usd: 0.01, model: 'claude-x', cumulative: true }
  ])
})

t.test('claude: a non-zero code it judged no failure (test answering 1) is no 0: the code is unknown', async (t) => {
  const stream = lines(
    {
      type: 'assistant',
      message: { content: [{ type: 'tool_use', id: 'toolu_9', name: 'Bash', input: { command: 'test -e x' } }] }
    },
    {
      type: 'user',
      message: {
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_9', content: '(Bash completed with no output)', is_error: false }
        ]
      },
      tool_use_result: { stdout: '', returnCodeInterpretation: 'Condition is false' }
    }
  )
  t.match(stepsOf(claudeSteps(), stream).steps.at(-1), { phase: 'completed', status: 'succeeded', exit_code: null })
})

t.test('claude: a refusal told only by its tool_result (its meta says reject, no permission_denied line first) ' +
  'is a denied step', async (t) => {
  const stream = lines(
    {
      type: 'assistant',
      message: { content: [{ type: 'tool_use', id: 'toolu_4', name: 'Bash', input: { command: 'touch x' } }] }
    },
    {
      type: 'user',
      message: {
        content: [{ type: 'tool_result', tool_use_id: 'toolu_4', content: 'touch needs approval.', is_error: true }]
      },
      tool_result_meta: [
        {
          id: 'toolu_4',
          non_execution_kind: 'user-rejected',
          permission_decision: { decision: 'reject', source: 'config' }
        }
      ]
    }
  )
  t.same(stepsOf(claudeSteps(), stream).steps.at(-1), {
    kind: 'command',
    phase: 'completed',
    call_id: 'toolu_4',
    command: 'touch x',
    status: 'denied',
    exit_code: null,
    output: 'touch needs approval.'
  })
  const accepted = stream.replace('"reject"', '"accept"')
  t.match(
    stepsOf(claudeSteps(), accepted).steps.at(-1), { status: 'failed' },
    'a meta that accepted it: an error like any other'
  )
})

t.test('claude: the result line\'s permission_denials have the last word, and nothing is denied twice', async (t) => {
  const stream = lines(
    // Still open when the result comes: it ends denied there.
    {
      type: 'assistant',
      message: { content: [{ type: 'tool_use', id: 'toolu_5', name: 'Bash', input: { command: 'rm -rf build' } }] }
    },
    // Denied live (dontAsk), then its error tool_result: one denied end, whatever repeats it.
    {
      type: 'assistant',
      message: { content: [{ type: 'tool_use', id: 'toolu_6', name: 'Bash', input: { command: 'touch y' } }] }
    },
    {
      type: 'system',
      subtype: 'permission_denied',
      tool_name: 'Bash',
      tool_use_id: 'toolu_6',
      message: 'denied in don\'t ask mode'
    },
    {
      type: 'user',
      message: {
        content: [{ type: 'tool_result', tool_use_id: 'toolu_6', content: 'denied in don\'t ask mode', is_error: true }]
      }
    },
    {
      type: 'result',
      subtype: 'success',
      is_error: false,
      usage: { input_tokens: 1, output_tokens: 1 },
      permission_denials: [
        { tool_name: 'Bash', tool_use_id: 'toolu_5', tool_input: { command: 'rm -rf build' } },
        { tool_name: 'Bash', tool_use_id: 'toolu_6', tool_input: { command: 'touch y' } },
        // No line started it: the denial says what it was.
        { tool_name: 'Write', tool_use_id: 'toolu_7', tool_input: { file_path: '/w/b.ts', content: 'x' } },
        'not a denial', { tool_name: 'Bash' }
      ]
    }
  )
  const ends = stepsOf(claudeSteps(), stream).steps.filter((step) => 'phase' in step && step.phase === 'completed')
  t.same(ends, [
    {
      kind: 'command',
      phase: 'completed',
      call_id: 'toolu_6',
      command: 'touch y',
      status: 'denied',
      exit_code: null,
      output: 'denied in don\'t ask mode'
    },
    {
      kind: 'command',
      phase: 'completed',
      call_id: 'toolu_5',
      command: 'rm -rf build',
      status: 'denied',
      exit_code: null,
      output: null
    },
    {
      kind: 'file_change',
      tool: 'Write',
      path: '/w/b.ts',
      change: null,
      phase: 'completed',
      call_id: 'toolu_7',
      status: 'denied'
    }
  ])
  t.match(
    stepsOf(claudeSteps(), stream).steps.filter((step) => 'call_id' in step && step.call_id === 'toolu_7'),
    [{ phase: 'started' }, { phase: 'completed' }], 'its start too'
  )
})

t.test('codex: a command item started then completed, a patch reported only once applied, ' +
  'the turn\'s usage', async (t) => {
  const stream = lines(
    { type: 'thread.started', thread_id: 'th-1' },
    {
      type: 'item.started',
      item: {
        id: 'item_1',
        type: 'command_execution',
        command: "/bin/bash -lc 'ls'",
        aggregated_output: '',
        exit_code: null,
        status: 'in_progress'
      }
    },
    {
      type: 'item.completed',
      item: {
        id: 'item_1',
        type: 'command_execution',
        command: "/bin/bash -lc 'ls'",
        aggregated_output: 'a.ts\n',
        exit_code: 0,
        status: 'completed'
      }
    },
    {
      type: 'item.completed',
      item: {
        id: 'item_2',
        type: 'file_change',
        changes: [{ path: '/w/a.ts', kind: 'update' }, { path: '/w/old.ts', kind: 'delete' }],
        status: 'completed'
      }
    },
    {
      type: 'item.completed',
      item: {
        id: 'item_3',
        type: 'command_execution',
        command: 'rm -rf /',
        aggregated_output: '',
        exit_code: null,
        status: 'declined'
      }
    },
    { type: 'item.completed', item: { id: 'item_4', type: 'agent_message', text: 'Done.' } },
    { type: 'error', message: 'Reconnecting... 1/5' },
    { type: 'turn.completed', usage: { input_tokens: 10, cached_input_tokens: 0, output_tokens: 5 } }
  )
  const { steps } = stepsOf(codexSteps(), stream)
  t.same(steps.map((step) => [step.kind, 'phase' in step ? step.phase : '', 'status' in step ? step.status : '']), [
    ['command', 'started', 'running'], ['command', 'completed', 'succeeded'],
    ['file_change', 'started', 'running'], ['file_change', 'completed', 'succeeded'],
    ['file_change', 'started', 'running'], ['file_change', 'completed', 'succeeded'],
    ['command', 'started', 'running'], ['command', 'completed', 'denied'],
    ['message', '', ''], ['error', '', ''], ['usage', '', '']
  ], 'an end always has its start')
  t.match(steps[1], { exit_code: 0, output: 'a.ts\n' })
  t.match(steps.filter((step) => step.kind === 'file_change' && step.phase === 'completed'), [
    { path: '/w/a.ts', change: 'edited' }, { path: '/w/old.ts', change: 'deleted' }
  ])
  t.match(steps.at(-2), { kind: 'error', fatal: false }, 'a reconnection is no end')
  t.match(steps.at(-1), { kind: 'usage', input_tokens: 10, output_tokens: 5, cost_usd: null, cumulative: true })
})

t.test('gemini: deltas merged into one message, the exit code only where it shows, a policy denial', async (t) => {
  const stream = lines(
    { type: 'init', session_id: 's-2', model: 'gemini-x' },
    { type: 'message', role: 'user', content: 'the task' },
    { type: 'message', role: 'assistant', content: 'Let me ', delta: true },
    { type: 'message', role: 'assistant', content: 'look.', delta: true },
    { type: 'tool_use', tool_name: 'run_shell_command', tool_id: 'run_1', parameters: { command: 'false' } },
    { type: 'tool_result', tool_id: 'run_1', status: 'success', output: 'Command exited with code: 1' },
    { type: 'tool_use', tool_name: 'run_shell_command', tool_id: 'run_2', parameters: { command: 'ls' } },
    { type: 'tool_result', tool_id: 'run_2', status: 'success', output: 'a.ts' },
    {
      type: 'tool_use',
      tool_name: 'replace',
      tool_id: 'rep_1',
      parameters: { file_path: '/w/a.ts', old_string: 'a', new_string: 'b' }
    },
    {
      type: 'tool_result',
      tool_id: 'rep_1',
      status: 'error',
      error: { type: 'policy_violation', message: 'Tool execution denied by policy.' }
    },
    { type: 'message', role: 'assistant', content: 'Done.', delta: true },
    { type: 'result', status: 'success', stats: { input_tokens: 7, output_tokens: 3, models: { 'gemini-x': {} } } }
  )
  const { steps } = stepsOf(geminiSteps(), stream)
  t.match(steps, [
    { kind: 'message', text: 'Let me look.' },
    { kind: 'command', phase: 'started', command: 'false' },
    { kind: 'command', phase: 'completed', exit_code: 1, status: 'succeeded' },
    { kind: 'command', phase: 'started', command: 'ls' },
    { kind: 'command', phase: 'completed', exit_code: null, output: 'a.ts' },
    { kind: 'file_change', phase: 'started', path: '/w/a.ts', change: 'edited' },
    { kind: 'file_change', phase: 'completed', status: 'denied' },
    { kind: 'message', text: 'Done.' },
    { kind: 'usage', input_tokens: 7, output_tokens: 3, model: 'gemini-x', cumulative: true }
  ])
  t.equal(steps.length, 9)
  const trailing = stepsOf(
    geminiSteps(), lines({ type: 'message', role: 'assistant', content: 'cut short', delta: true })
  ).steps
  t.same(
    trailing, [{ kind: 'message', text: 'cut short', truncated: false }],
    'text still held when the output ends is a message'
  )
})

t.test('opencode: each tool only once ended, given its start too; per-step usage to add up; its error', async (t) => {
  const stream = lines(
    { type: 'step_start', sessionID: 'ses_1', part: { type: 'step-start' } },
    {
      type: 'tool_use',
      sessionID: 'ses_1',
      part: {
        id: 'prt_1',
        callID: 'call_1',
        tool: 'bash',
        state: { status: 'completed', input: { command: 'ls' }, output: 'a.ts\n', metadata: { exit: 0 } }
      }
    },
    {
      type: 'tool_use',
      sessionID: 'ses_1',
      part: {
        id: 'prt_2',
        callID: 'call_2',
        tool: 'write',
        state: { status: 'completed', input: { filePath: '/w/new.ts' }, metadata: { exists: false } }
      }
    },
    { type: 'tool_use', sessionID: 'ses_1', part: { id: 'prt_3', callID: 'call_3', tool: 'webfetch', state: { status: 'error', input: { url: 'https://x' }, error: 'The user rejected permission to use this specific tool call.' } } },
    { type: 'text', sessionID: 'ses_1', part: { type: 'text', text: 'All done.' } },
    {
      type: 'step_finish',
      sessionID: 'ses_1',
      part: { type: 'step-finish', cost: 0.002, tokens: { input: 4, output: 2 } }
    },
    { type: 'error', sessionID: 'ses_1', error: { name: 'APIError', data: { message: 'rate limited' } } }
  )
  const { steps } = stepsOf(opencodeSteps(), stream)
  t.match(steps, [
    { kind: 'command', phase: 'started', call_id: 'call_1', command: 'ls', status: 'running' },
    { kind: 'command', phase: 'completed', call_id: 'call_1', exit_code: 0, status: 'succeeded' },
    { kind: 'file_change', phase: 'started', path: '/w/new.ts', change: 'created' },
    { kind: 'file_change', phase: 'completed', status: 'succeeded' },
    { kind: 'tool', phase: 'started', name: 'webfetch', input: 'https://x' },
    { kind: 'tool', phase: 'completed', status: 'denied' },
    { kind: 'message', text: 'All done.' },
    { kind: 'usage', input_tokens: 4, output_tokens: 2, cost_usd: 0.002, cumulative: false },
    { kind: 'error', message: 'rate limited', fatal: true }
  ])
  t.equal(steps.length, 9)
})

t.test('however the output is chunked, the same steps: a line split anywhere, even inside a character', async (t) => {
  const stream = CLAUDE.replace('Running the tests.', 'Running the tests… ✓ €')
  const whole = stepsOf(claudeSteps(), stream).steps
  const bytes = Buffer.byteLength(stream)
  for (let cut = 1; cut < bytes; cut++) t.same(stepsOf(claudeSteps(), stream, [cut]).steps, whole, `cut at byte ${cut}`)
  for (let trial = 0; trial < 50; trial++) {
    const cuts = [
      ...new Set(Array.from({ length: 8 }, () => 1 + Math.floor(Math.random() * (bytes - 1))))
    ].sort((a, b) => a - b)
    t.same(stepsOf(claudeSteps(), stream, cuts).steps, whole, `cuts ${cuts.join(',')}`)
  }
  t.same(
    stepsOf(claudeSteps(), stream, Array.from({ length: bytes - 1 }, (_, index) => index + 1)).steps, whole,
    'one byte at a time'
  )
})

t.test('what is not a step is skipped and counted, a huge line is never held whole, and nothing throws', async (t) => {
  const huge = JSON.stringify({
    type: 'assistant', message: { content: [{ type: 'text', text: 'x'.repeat(3 * 1024 * 1024) }] }
  })
  const stream = [
    'Warning: not JSON at all',
    '{"type":"assistant","message":',
    huge,
    '[1,2,3]',
    'null',
    '{"type":"user","message":{"content":"not an array"}}',
    '{"type":"assistant","message":{"content":[{"type":"text","text":"still here"}]}}'
  ].join('\n')
  // In 64 KiB chunks, as a pipe gives them.
  const chunks = Array.from(
    { length: Math.floor(Buffer.byteLength(stream) / 65536) }, (_, index) => (index + 1) * 65536
  )
  const { steps, skipped } = stepsOf(claudeSteps(), stream, chunks)
  t.same(steps, [{ kind: 'message', text: 'still here', truncated: false }], 'the line after them is read')
  t.equal(skipped, 3, 'not JSON, cut short, over the line limit')
  const long = stepsOf(
    claudeSteps(), lines({ type: 'assistant', message: { content: [{ type: 'text', text: 'y'.repeat(10_000) }] } })
  ).steps
  t.match(long, [{ kind: 'message', truncated: true }], 'a long message is cut to an excerpt')
  t.equal((long[0] as { text: string }).text.length, 4096)
})

t.test('blanks are no lines, and blanks around a line are no part of it: CRLF, a BOM, spaces, ' +
  'whole in a chunk or split', async (t) => {
  const text = (said: string) => `{"type":"assistant","message":{"content":[{"type":"text","text":"${said}"}]}}`
  const stream = [
    '', '   ', '\r', `\ufeff${text('after a BOM')}`, `${text('with CRLF')}\r`, `  ${text('indented')}  `, '\u00a0'
  ].join('\n') + '\n'
  const expected = ['after a BOM', 'with CRLF', 'indented'].map(
    (said) => ({ kind: 'message', text: said, truncated: false })
  )
  for (const cuts of [[], [1], [5, 40, 90]]) {
    const { steps, skipped } = stepsOf(claudeSteps(), stream, cuts)
    t.same(steps, expected, `cut at ${JSON.stringify(cuts)}`)
    t.equal(skipped, 0, 'and nothing skipped')
  }
})

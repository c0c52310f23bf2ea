import t from 'tap'
import { PendingProgress } from '#src/http/mcp/progress.js'
import { stepLine } from '#src/http/step-line.js'

// What an MCP host shows people while an agent works: each step as one line, the newest output bounded.

t.test('each kind of step reads as one line, its end with how it ended', async (t) => {
  const call = { phase: 'completed', call_id: 'c1' } as const
  t.equal(stepLine({ kind: 'message', text: 'Done.', truncated: false }), 'Done.')
  t.equal(
    stepLine({ kind: 'command', ...call, command: 'npm test', status: 'running', exit_code: null, output: null }),
    '$ npm test'
  )
  t.equal(
    stepLine({ kind: 'command', ...call, command: 'npm test', status: 'failed', exit_code: 1, output: 'x' }),
    '$ npm test (exit 1)'
  )
  t.equal(
    stepLine({ kind: 'command', ...call, command: 'make', status: 'denied', exit_code: null, output: null }),
    '$ make (denied)'
  )
  t.equal(
    stepLine({ kind: 'file_change', ...call, tool: 'Edit', path: 'src/a.ts', change: 'edited', status: 'succeeded' }),
    'edited src/a.ts (succeeded)'
  )
  t.equal(
    stepLine({ kind: 'file_change', ...call, tool: 'Write', path: 'b.ts', change: null, status: 'running' }),
    'changing b.ts'
  )
  t.equal(
    stepLine({ kind: 'tool', ...call, name: 'Read', input: '{"file":"a"}', status: 'succeeded' }),
    'Read {"file":"a"} (succeeded)'
  )
  t.equal(stepLine({ kind: 'error', message: 'rate limited', fatal: false }), 'error: rate limited')
  t.equal(
    stepLine({ kind: 'usage', input_tokens: 10, output_tokens: 5, cost_usd: 0.01, model: null, cumulative: true }),
    'tokens: 10 in, 5 out, $0.01'
  )
  t.equal(
    stepLine({ kind: 'usage', input_tokens: null, output_tokens: 5, cost_usd: null, model: null, cumulative: false }),
    'tokens: ? in, 5 out'
  )
})

t.test('what waits for the next notification keeps its newest 64 KiB, and says how much it left out', async (t) => {
  const pending = new PendingProgress()
  t.ok(pending.empty)
  for (let index = 0; index < 100; index++) pending.push(Buffer.alloc(1024, 'a'))
  const message = pending.take()
  t.match(message, /^…\[36864 bytes of output not shown\]…\n/)
  t.ok(pending.empty, 'taken')
})

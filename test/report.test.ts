import t from 'tap'
import { parseClaudeReport } from '../src/agents/report.js'

t.test('the last result line is the report, after any stderr noise', async (t) => {
  const report = { type: 'result', subtype: 'success', is_error: false, result: 'Done.', session_id: 's1', num_turns: 3, total_cost_usd: 0.5, duration_ms: 1200, duration_api_ms: 900, usage: {} }
  const parsed = parseClaudeReport(`warning: something\n{"not":"a report"}\n${JSON.stringify(report)}\n`)
  t.same(parsed, {
    text: 'Done.',
    report: { is_error: false, subtype: 'success', session_id: 's1', num_turns: 3, total_cost_usd: 0.5, duration_ms: 1200, duration_api_ms: 900 }
  })
})

t.test('no report: null, so the route falls back to what was printed', async (t) => {
  t.equal(parseClaudeReport('--dangerously-skip-permissions cannot be used with root/sudo privileges\n'), null)
  t.equal(parseClaudeReport('{"type":"result"'), null, 'a truncated line')
  t.equal(parseClaudeReport('{"type":"assistant","is_error":false}'), null, 'not the result event')
})

t.test('fields of the wrong type are left out rather than trusted', async (t) => {
  const parsed = parseClaudeReport('{"type":"result","is_error":true,"num_turns":"many","session_id":7}')
  t.same(parsed, { text: '', report: { is_error: true, subtype: undefined, session_id: undefined, num_turns: undefined, total_cost_usd: undefined, duration_ms: undefined, duration_api_ms: undefined } })
})

import t from 'tap'
import { StepsTally } from '#src/runs/steps-summary.js'
import { SUMMARY_COMMANDS_MAX, SUMMARY_FILES_MAX, type Step } from '#src/schemas/steps.js'

const command = (
  callId: string, exitCode: number | null, status: 'succeeded' | 'failed' | 'denied' = 'succeeded'
): Step => ({
  kind: 'command',
  phase: 'completed',
  call_id: callId,
  command: `cmd ${callId}`,
  status,
  exit_code: exitCode,
  output: null
})
const file = (
  path: string, change: 'created' | 'edited' | 'deleted' | null, status: 'succeeded' | 'failed' = 'succeeded'
): Step => ({
  kind: 'file_change', phase: 'completed', call_id: path, tool: 'Edit', path, change, status
})
const usage = (input: number, output: number, cost: number | null, cumulative: boolean): Step => ({
  kind: 'usage', input_tokens: input, output_tokens: output, cost_usd: cost, model: null, cumulative
})

t.test('what a run did: its commands once ended, each file once with its last change, tools counted', async (t) => {
  const tally = new StepsTally()
  const started: Step = {
    kind: 'command', phase: 'started', call_id: 'a', command: 'cmd a', status: 'running', exit_code: null, output: null
  }
  for (const step of [
    started, command('a', 0), command('b', 2, 'failed'),
    file('/w/new.ts', 'created'), file('/w/new.ts', 'edited'), file('/w/old.ts', 'deleted'),
    file('/w/x.ts', 'edited', 'failed'),
    { kind: 'tool', phase: 'completed', call_id: 't1', name: 'Grep', input: 'x', status: 'succeeded' },
    { kind: 'tool', phase: 'completed', call_id: 't2', name: 'Grep', input: 'y', status: 'succeeded' },
    { kind: 'tool', phase: 'completed', call_id: 't3', name: '__proto__', input: '', status: 'succeeded' },
    { kind: 'message', text: 'hi', truncated: false }, { kind: 'error', message: 'retry', fatal: false }
  ] satisfies Step[]) tally.add(step)
  t.same(tally.summary(3), {
    commands: [
      { command: 'cmd a', exit_code: 0, status: 'succeeded' }, { command: 'cmd b', exit_code: 2, status: 'failed' }
    ],
    commands_omitted: 0,
    files_changed: [{ path: '/w/new.ts', change: 'created' }, { path: '/w/old.ts', change: 'deleted' }],
    files_omitted: 0,
    tools: Object.fromEntries([['Grep', 2], ['__proto__', 1]]),
    denied: [],
    turns: 2,
    messages: 1,
    errors: 1,
    skipped_lines: 3
  }, 'a file created then edited was created; a change that failed changed nothing; the message after the calls ' +
    'a second response')
  t.notOk(tally.allDenied)
})

t.test('bounded whatever the run did: the lists stop, the counts go on', async (t) => {
  const tally = new StepsTally()
  for (let index = 0; index < SUMMARY_COMMANDS_MAX + 7; index++) tally.add(command(String(index), 0))
  for (let index = 0; index < SUMMARY_FILES_MAX + 3; index++) tally.add(file(`/w/${index}`, 'edited'))
  tally.add(file('/w/0', 'deleted'))
  const summary = tally.summary(0)
  t.equal(summary.commands.length, SUMMARY_COMMANDS_MAX)
  t.equal(summary.commands_omitted, 7)
  t.equal(summary.files_changed.length, SUMMARY_FILES_MAX)
  t.equal(summary.files_omitted, 3)
  t.match(
    summary.files_changed[0], { path: '/w/0', change: 'deleted' }, 'a file already listed still gets its last change'
  )
})

t.test('usage: totals replace what came before, one call\'s usage adds to it', async (t) => {
  const added = new StepsTally()
  added.add(usage(4, 2, 0.5, false))
  added.add(usage(6, 3, null, false))
  t.same(added.usage, { input_tokens: 10, output_tokens: 5, cost_usd: 0.5, model: null })
  const totals = new StepsTally()
  totals.add(usage(4, 2, null, true))
  totals.add(usage(9, 4, null, true))
  t.same(totals.usage, { input_tokens: 9, output_tokens: 4, cost_usd: null, model: null })
  t.equal(new StepsTally().usage, null, 'none reported: null')
})

t.test('a run whose every call was refused did nothing it was asked; ' +
  'one call that went through is enough', async (t) => {
  const refused = new StepsTally()
  refused.add(command('a', null, 'denied'))
  refused.add({ kind: 'tool', phase: 'completed', call_id: 'b', name: 'Write', input: '', status: 'denied' })
  t.ok(refused.allDenied)
  t.same(refused.summary(0).denied, [
    { kind: 'command', name: 'cmd a', call_id: 'a' }, { kind: 'tool', name: 'Write', call_id: 'b' }
  ])
  refused.add(command('c', 0))
  t.notOk(refused.allDenied)
  t.notOk(new StepsTally().allDenied, 'no call at all is not a refusal')
})

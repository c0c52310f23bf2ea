import t from 'tap'
import { taskExcerpt, TASK_EXCERPT_CHARS } from '#src/runs/task-excerpt.js'
import { Run } from '#src/runs/run.js'

// What a listing shows of a run's task and time (src/runs/task-excerpt.ts, src/runs/run.ts).

t.test('a task is shown whole up to the excerpt’s length, then cut with …', async (t) => {
  const whole = 'a'.repeat(TASK_EXCERPT_CHARS)
  t.equal(taskExcerpt(whole), whole)
  t.equal(taskExcerpt(`${whole}b`), `${whole}…`)
})

t.test('an excerpt counts characters, not UTF-16 units: an emoji is never split', async (t) => {
  const emojis = '😀'.repeat(TASK_EXCERPT_CHARS + 1)
  const excerpt = taskExcerpt(emojis)
  t.equal(excerpt, `${'😀'.repeat(TASK_EXCERPT_CHARS)}…`)
  t.notOk(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(excerpt), 'no lone high surrogate')
})

t.test('a run holds its excerpt from its opening, ' +
  'and its deadline from its agent’s start plus its timeout', async (t) => {
  const run = new Run({
    kind: 'async', tool: 'crush_run', caller: 'alice', params: { task: 'a'.repeat(300), timeout: 90 }
  })
  t.equal(run.snapshot().task, `${'a'.repeat(TASK_EXCERPT_CHARS)}…`, 'the excerpt, before anything started')
  t.equal(run.snapshot().deadline, undefined, 'no deadline before its agent starts')
  for (const next of ['placed', 'waiting_for_slot', 'starting'] as const) run.advance(next)
  const before = Date.now()
  run.spawned(4242)
  const deadline = Date.parse(run.snapshot().deadline!)
  t.ok(deadline >= before + 90_000 && deadline <= Date.now() + 90_000, 'its start plus 90 s')
})

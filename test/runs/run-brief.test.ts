import t from 'tap'
import { runBrief, taskExcerpt, TASK_EXCERPT_CHARS } from '#src/runs/run-brief.js'

// What a listing shows of a run's task and time (src/runs/run-brief.ts).

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

t.test('the deadline is the start plus the timeout', async (t) => {
  t.same(runBrief({ task: 'x', timeout: 90 }, Date.UTC(2026, 0, 1)), { task: 'x', deadline: '2026-01-01T00:01:30.000Z' })
})

import t from 'tap'
import { OutputChecks } from '#src/runs/output-checks.js'

// Answers are checked against their output_schema on a thread of their own, each within a time budget (issue 59,
// item 4): a schema and an answer that would take minutes cost that thread the budget, and the service's thread
// nothing (src/runs/output-checks.ts).

const SCHEMA = { type: 'object', properties: { verdict: { enum: ['pass', 'fail'] } }, required: ['verdict'] }
/**
 * Items that are not numbers nor strings are compared pair by pair: 30,000 arrays (210 KB, within the answer's end
 * that is read) are 450 million comparisons, some 20 s of a thread.
 */
const UNIQUE_ITEMS = { type: 'object', properties: { items: { type: 'array', uniqueItems: true } } }
const MANY_ITEMS = `{"items":[${Array.from({ length: 30_000 }, (_, index) => `[${index}]`).join(',')}]}`

t.test('a check past its budget is not ok, saying so, while the service’s thread goes on; the next check gets a new ' +
  'thread', async (t) => {
  const checks = new OutputChecks(300)
  t.teardown(() => checks.close())
  let answered = false
  const checking = checks.check(MANY_ITEMS, UNIQUE_ITEMS).finally(() => { answered = true })
  // A timer shorter than the budget, set before it: it fires first unless the check holds this thread.
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(answered, false, 'the service’s thread ran while the check was under way')
  t.same(await checking, {
    error: {
      code: 'OUTPUT_SCHEMA_MISMATCH',
      message: 'the answer could not be checked against output_schema within 300 ms',
      schema_errors: []
    }
  })
  t.same(await checks.check('Done.\n{"verdict":"pass"}', SCHEMA), { value: { verdict: 'pass' } })
  t.match(await checks.check('{"verdict":"maybe"}', SCHEMA), {
    error: { code: 'OUTPUT_SCHEMA_MISMATCH', schema_errors: [{ instance_path: '/verdict' }] }
  })
})

t.test('checks asked at once are answered in turn, each its own', async (t) => {
  const checks = new OutputChecks()
  t.teardown(() => checks.close())
  const reads = await Promise.all(['pass', 'fail', 'pass'].map((verdict) =>
    checks.check(`{"verdict":"${verdict}"}`, SCHEMA)))
  t.same(reads, [{ value: { verdict: 'pass' } }, { value: { verdict: 'fail' } }, { value: { verdict: 'pass' } }])
})

t.test('a thread that cannot start fails the checks waiting for it instead of starting again forever', async (t) => {
  const checks = new OutputChecks(1000, new URL('data:text/javascript,throw new Error("no such thread")'))
  t.teardown(() => checks.close())
  const reads = await Promise.all([checks.check('{}', SCHEMA), checks.check('{}', SCHEMA)])
  for (const read of reads) {
    t.match(read, { error: { code: 'OUTPUT_SCHEMA_MISMATCH', message: /could not be checked.*no such thread/ } })
  }
})

t.test('closed, its thread ends once the checks asked for are answered', async (t) => {
  const checks = new OutputChecks()
  const answered = checks.check('{"verdict":"pass"}', SCHEMA)
  await checks.close()
  t.same(await answered, { value: { verdict: 'pass' } })
  await checks.close()
})

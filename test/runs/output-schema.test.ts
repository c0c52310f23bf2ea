import t from 'tap'
import { compileOutputSchema, lastJsonObject, OUTPUT_SCHEMA_MAX_BYTES, promptWithSchema, structuredOutput } from
  '#src/runs/output-schema.js'

// `output_schema` (issue 41, item 3): the object an answer ends with, found and checked with Ajv (2020-12, strict).

const SCHEMA = {
  type: 'object',
  properties: { verdict: { enum: ['pass', 'fail'] }, count: { type: 'integer' } },
  required: ['verdict', 'count'],
  additionalProperties: false
}

t.test('the last JSON object an answer ends with: after prose, in a fence, nested, braces in strings', async (t) => {
  t.same(lastJsonObject('Done.\n{"verdict":"pass","count":2}'), { verdict: 'pass', count: 2 })
  t.same(lastJsonObject('Here:\n```json\n{"a": {"b": [1, {"c": 2}]}}\n```\n'), { a: { b: [1, { c: 2 }] } })
  t.same(lastJsonObject('{"first":1} then {"second":"}{"}'), { second: '}{' }, 'the last one, braces in a string')
  t.equal(lastJsonObject('{"a":1} and then more prose'), undefined, 'text after it: the answer does not end with one')
  t.equal(lastJsonObject('[1, 2, 3]'), undefined, 'an array is no object')
  t.equal(lastJsonObject('{not json}'), undefined)
  t.equal(lastJsonObject(''), undefined)
  const braces = `${'{"a":'.repeat(100_000)}}`
  t.equal(lastJsonObject(braces), undefined, 'a flood of braces is given up on, not parsed forever')
})

t.test('a schema Ajv cannot compile in strict mode, or too large, is BAD_OUTPUT_SCHEMA', async (t) => {
  t.throws(() => compileOutputSchema({ type: 'object', requred: ['x'] }), { code: 'BAD_OUTPUT_SCHEMA' })
  t.throws(() => compileOutputSchema({ type: 'nope' }), { code: 'BAD_OUTPUT_SCHEMA' })
  const huge = { type: 'object', description: 'x'.repeat(OUTPUT_SCHEMA_MAX_BYTES) }
  t.throws(() => compileOutputSchema(huge), { code: 'BAD_OUTPUT_SCHEMA', message: /over 65536/ })
  t.doesNotThrow(() => compileOutputSchema(SCHEMA))
  t.doesNotThrow(() => compileOutputSchema({ ...SCHEMA }), 'the same schema again: nothing of the first was kept')
})

t.test('an answer met or missed: the object, or OUTPUT_SCHEMA_MISMATCH with Ajv’s first errors', async (t) => {
  const validate = compileOutputSchema(SCHEMA)
  const met = structuredOutput('All good.\n{"verdict":"pass","count":3}', validate)
  t.same(met, { value: { verdict: 'pass', count: 3 } })
  t.match(structuredOutput('{"verdict":"maybe","count":3}', validate), {
    error: { code: 'OUTPUT_SCHEMA_MISMATCH', schema_errors: [{ instance_path: '/verdict', message: /allowed values/ }] }
  })
  t.match(structuredOutput('no object at all', validate), {
    error: { code: 'OUTPUT_SCHEMA_MISMATCH', message: /does not end with a JSON object/, schema_errors: [] }
  })
})

t.test('the prompt is the task, byte for byte, then the request and the schema', async (t) => {
  const task = '--help\n$(rm -rf /) "quoted"'
  const prompt = promptWithSchema(task, SCHEMA)
  t.ok(prompt.startsWith(`${task}\n\n`))
  t.match(prompt, JSON.stringify(SCHEMA))
})

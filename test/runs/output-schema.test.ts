import t from 'tap'
import {
  compileOutputSchema, lastJsonObject, OUTPUT_SCHEMA_MAX_BYTES, promptWithSchema, re2Syntax, structuredOutput
} from '#src/runs/output-schema.js'

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

t.test('patterns run on RE2: a backtracking one ends at once; what RE2 cannot run is BAD_OUTPUT_SCHEMA, saying why',
  async (t) => {
    // On a backtracking engine each x doubles the work: 40 of them would hold the thread for days.
    const validate = compileOutputSchema({ type: 'object', properties: { a: { type: 'string', pattern: '(x+x+)+y' } } })
    t.match(structuredOutput(`{"a":"${'x'.repeat(40)}"}`, validate), {
      error: { code: 'OUTPUT_SCHEMA_MISMATCH', schema_errors: [{ instance_path: '/a', message: /pattern/ }] }
    })
    t.same(structuredOutput(`{"a":"${'x'.repeat(40)}y"}`, validate), { value: { a: `${'x'.repeat(40)}y` } })
    const keys = compileOutputSchema({
      type: 'object', patternProperties: { '^k\\d+$': { type: 'integer' } }, additionalProperties: false
    })
    t.same(structuredOutput('{"k1":1,"k22":2}', keys), { value: { k1: 1, k22: 2 } })
    t.match(structuredOutput('{"k1":1,"other":2}', keys), { error: { code: 'OUTPUT_SCHEMA_MISMATCH' } })
    for (const pattern of ['(a)\\1', '(?=a)b', '(?<!a)b']) {
      t.throws(() => compileOutputSchema({ type: 'string', pattern }), {
        code: 'BAD_OUTPUT_SCHEMA', message: /not one RE2 runs .*no backreferences, no lookahead or lookbehind/
      }, pattern)
    }
  })

t.test('ECMAScript’s \\u escapes read as RE2 writes them; an escaped backslash before a u stays one', async (t) => {
  t.equal(re2Syntax('^\\u00e9\\u{1F600}$'), '^\\x{00e9}\\x{1F600}$')
  t.equal(re2Syntax('\\\\u00e9'), '\\\\u00e9', 'a backslash, then the letters u00e9')
  t.equal(re2Syntax('\\d+\\.\\w'), '\\d+\\.\\w', 'other escapes as they are')
  const validate = compileOutputSchema({ type: 'string', pattern: '^caf\\u00e9$' })
  t.ok(validate('café'))
  t.notOk(validate('cafe'))
})

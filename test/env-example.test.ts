import t from 'tap'
import { readFileSync } from 'node:fs'
import { EnvSchema } from '#src/config.js'
import { fromRoot } from './helpers/root.js'

// .env.example is the reference for operators: every variable the service reads, with its default.
const documented = new Map(
  readFileSync(fromRoot('.env.example'), 'utf8')
    .split('\n')
    .map((line) => /^#? ?([A-Z][A-Z0-9_]+)=(.*)$/.exec(line))
    .filter((match): match is RegExpExecArray => match !== null)
    .map((match) => [match[1]!, match[2]!])
)

t.test('every variable is in .env.example with its default', async (t) => {
  for (const [variable, schema] of Object.entries(EnvSchema.properties)) {
    t.ok(documented.has(variable), `${variable} is documented`)
    const fallback = (schema as { default?: string | number | boolean }).default
    if (fallback !== undefined) t.equal(documented.get(variable), String(fallback), `${variable} default`)
  }
  t.same([...documented.keys()].filter((variable) => !(variable in EnvSchema.properties)), [], 'nothing stale')
})

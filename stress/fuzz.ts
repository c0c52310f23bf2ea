import t from 'tap'
import fc from 'fast-check'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { build, standInEnv, tempDir } from '../test/helpers/index.js'

const ERROR_KEYS = ['code', 'error', 'message', 'statusCode']

/** Bodies near the schema's edges, and far from it. */
const field = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary', maxLength: 50 }),
  fc.constantFrom('', '--help', '$(id)', '/', '/tmp', 'relative', 'a\u0000b', 'x'.repeat(30_001), 'Ubuntu', 'a;b'),
  fc.integer(),
  fc.double(),
  fc.constantFrom(0, 1, 1800, 1801, -1, 1.5, null, true, [], {}),
  fc.anything()
)
const validBody = fc.record(
  {
    task: fc.string({ minLength: 1, maxLength: 200 }).filter((task) => !task.includes('\u0000')),
    timeout: fc.integer({ min: 1, max: 1800 })
  },
  { requiredKeys: ['task'] }
)
const body = fc.oneof(
  validBody,
  fc.record(
    {
      task: field,
      timeout: field,
      cwd: field,
      wsl_distro: field,
      wsl_user: field,
      extra: field
    },
    { requiredKeys: [] }
  ),
  fc.dictionary(fc.string(), field),
  fc.anything()
)

t.test('thousands of random bodies: never a 5xx, every 4xx in the error shape, a spawn only for a 200', async (t) => {
  const log = join(tempDir(t), 'starts.log')
  const app = await build(
    t, { CRUSH_BIN: 'fast-agent', CLAUDE_BIN: 'fast-agent', MAX_CRUSH_AGENTS: '1000', MAX_CLAUDE_AGENTS: '1000' },
    standInEnv({ STAND_IN_LOG: log })
  )
  let started = 0
  await fc.assert(
    fc.asyncProperty(body, fc.constantFrom('crush_run', 'claude_run'), async (payload, tool) => {
      const response = await app.inject({
        method: 'POST',
        url: `/tools/${tool}`,
        headers: { 'content-type': 'application/json' },
        // JSON.stringify(undefined) is undefined, whatever its type says.
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition
        payload: JSON.stringify(payload) ?? ''
      })
      if (response.statusCode >= 500) return false
      if (response.statusCode === 200) {
        started++
        return true
      }
      return ERROR_KEYS.every((key) => key in response.json()) &&
        Object.keys(response.json()).length === ERROR_KEYS.length
    }),
    { numRuns: 3000 }
  )
  const spawned = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').filter(Boolean).length : 0
  t.ok(started > 0, `${started} valid bodies ran`)
  t.equal(spawned, started, 'agents started exactly for the requests that ran')
  t.equal(app.slots.inUse('crush_run') + app.slots.inUse('claude_run'), 0)
})

t.test('random headers and raw bodies: never a 5xx, every error in the shape', async (t) => {
  const log = join(tempDir(t), 'starts.log')
  const app = await build(t, { CRUSH_BIN: 'fast-agent', API_TOKENS: 'fuzz-token' }, standInEnv({ STAND_IN_LOG: log }))
  const headerValue = fc.oneof(
    fc.string(),
    fc.constantFrom(
      'application/json', 'application/json; charset=utf-8', 'text/plain', 'Bearer fuzz-token', 'Bearer x', 'gzip',
      '-1', '999999999'
    )
  )
  const headers = fc.record(
    {
      'content-type': headerValue,
      authorization: headerValue,
      'content-encoding': headerValue,
      accept: headerValue,
      'x-request-id': headerValue
    },
    { requiredKeys: [] }
  )
  await fc.assert(
    fc.asyncProperty(headers, fc.oneof(fc.string(), fc.constant('{"task":"x"}')), async (headerSet, payload) => {
      // Header values must be sendable at all: HTTP forbids control characters, which a client library refuses first.
      const sendable = Object.fromEntries(
        Object.entries(headerSet).filter(([, value]) => /^[\t\x20-\x7e]*$/.test(value))
      )
      const response = await app.inject({ method: 'POST', url: '/tools/crush_run', headers: sendable, payload })
      if (response.statusCode >= 500) return false
      if (response.statusCode === 200) return true
      return ERROR_KEYS.every((key) => key in response.json())
    }),
    { numRuns: 1500 }
  )
  t.equal(app.slots.inUse('crush_run'), 0)
})

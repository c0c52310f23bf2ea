import t from 'tap'
import { build, buildLogged, testConfig } from '../helpers/index.js'

// Bearer tokens (src/http/auth.ts): who may call, and that no secret ever reaches a log line.

const TOKEN = 'test-token-5f1c0a'

t.test('with API_TOKENS, /tools routes need a right bearer token; health stays open', async (t) => {
  const app = await build(t, { API_TOKENS: `other-token, ${TOKEN}` })
  const ask = (url: string, method: 'GET' | 'POST', authorization?: string) =>
    app.inject({
      method,
      url,
      payload: method === 'POST' ? { task: 'x' } : undefined,
      headers: authorization ? { authorization } : {}
    })

  for (const [url, method] of [
    ['/tools/crush_run', 'POST'], ['/tools/claude_run', 'POST'], ['/tools', 'GET']
  ] as const) {
    for (const authorization of [undefined, 'Bearer wrong', `Basic ${TOKEN}`, `Bearer ${TOKEN}x`, 'Bearer ']) {
      const response = await ask(url, method, authorization)
      t.equal(response.statusCode, 401, `${method} ${url} with ${authorization ?? 'no header'}`)
      t.equal(response.headers['www-authenticate'], 'Bearer realm="agent-runner"')
      t.same(Object.keys(response.json()).sort(), ['code', 'error', 'message', 'statusCode'])
      t.equal(response.json().code, 'UNAUTHORIZED')
    }
    t.equal((await ask(url, method, `Bearer ${TOKEN}`)).statusCode, 200, `${method} ${url} with the right token`)
    t.equal((await ask(url, method, 'Bearer other-token')).statusCode, 200, 'any configured token')
  }
  t.equal((await ask('/healthz', 'GET')).statusCode, 200, 'healthz needs no token')
  const anonymous = await ask('/readyz', 'GET')
  t.equal(anonymous.statusCode, 200, 'readyz needs no token')
  t.same(anonymous.json(), { status: 'ready' }, 'but without one it says only ready or not')
  t.same(Object.keys((await ask('/readyz', 'GET', 'Bearer wrong')).json()), ['status'])
  t.match(
    (await ask('/readyz', 'GET', `Bearer ${TOKEN}`)).json(),
    {
      status: 'ready', agents: [{ tool: 'crush_run', path: String }], slots: { ok: true }, containment: { mode: String }
    },
    'details for a token holder'
  )
  t.equal(app.slots.inUse('crush_run'), 0, 'refused requests took no slot')
})

t.test('tokens and Authorization headers never reach the logs', async (t) => {
  const { app, lines } = await buildLogged(t, { API_TOKENS: TOKEN, LOG_LEVEL: 'trace' })
  await app.inject({
    method: 'POST', url: '/tools/crush_run', payload: { task: 'x' }, headers: { authorization: `Bearer ${TOKEN}` }
  })
  await app.inject({
    method: 'POST', url: '/tools/crush_run', payload: { task: 'x' }, headers: { authorization: `Bearer ${TOKEN}-wrong` }
  })
  t.ok(lines.some((line) => line.includes('unauthorized')), 'the refused request was logged')
  t.notOk(lines.join('').includes(TOKEN), 'no token in any log line')
})

t.test("a named token's name, never its secret, tags the run's log lines", async (t) => {
  const { app, lines } = await buildLogged(t, { API_TOKENS: `studio:${TOKEN}` })
  await app.inject({
    method: 'POST', url: '/tools/crush_run', payload: { task: 'x' }, headers: { authorization: `Bearer ${TOKEN}` }
  })
  const entries = lines.map((line) => JSON.parse(line))
  t.match(entries.find((entry) => entry.msg === 'agent run started'), {
    caller: 'studio', tool: 'crush_run', agent_pid: Number, run: String
  })
  t.match(entries.find((entry) => entry.msg === 'agent run ended'), { caller: 'studio' })
  t.notOk(lines.join('').includes(TOKEN), 'no secret in any log line')
  t.ok(
    entries.every((entry) => !('pid' in entry) || entry.pid === process.pid),
    "the agent's pid never takes pino's `pid` key"
  )
})

t.test('a token is named by the very reading that authenticated it; `anonymous` is no token\'s name', async (t) => {
  const app = await build(t, { API_TOKENS: `studio:${TOKEN},other:other-secret` })
  // bearer-auth trims every Unicode blank around the secret: so must the name lookup, or this run would be nobody's.
  const created = await app.inject({
    method: 'POST',
    url: '/runs',
    payload: { tool: 'crush_run', task: 'x' },
    headers: { authorization: `Bearer ${TOKEN}\u00a0` }
  })
  t.equal(created.statusCode, 202)
  const mine = await app.inject({
    method: 'GET', url: `/runs/${created.json().id}`, headers: { authorization: `Bearer ${TOKEN}` }
  })
  t.equal(mine.statusCode, 200, 'the run is studio\'s')
  const theirs = await app.inject({
    method: 'GET', url: `/runs/${created.json().id}`, headers: { authorization: 'Bearer other-secret' }
  })
  t.equal(theirs.statusCode, 404, 'and not another token\'s')
  t.throws(
    () => testConfig({ API_TOKENS: 'anonymous:s3cret' }), /the name anonymous is reserved for callers without a token/
  )
})

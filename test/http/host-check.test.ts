import t from 'tap'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { allowedHostNames, hostName } from '#src/http/host-check.js'
import { build, listen, standInEnv, tempDir } from '../helpers/index.js'

const run = (headers: Record<string, string>) =>
  ({ method: 'POST' as const, url: '/tools/crush_run', payload: { task: 'x' }, headers })

t.test('Host names, with ports and IPv6 brackets', async (t) => {
  t.equal(hostName('LocalHost:8080'), 'localhost')
  t.equal(hostName('[::1]:8080'), '::1')
  t.equal(hostName('127.0.0.1'), '127.0.0.1')
  t.same([...allowedHostNames('127.0.0.2', ['Studio.internal'])].sort(), [
    '127.0.0.1', '127.0.0.2', '::1', 'localhost', 'studio.internal'
  ])
  t.notOk(allowedHostNames('0.0.0.0', []).has('0.0.0.0'), 'a wildcard address is no name')
})

t.test('without tokens, a rebound name is refused before anything runs (DNS rebinding)', async (t) => {
  const log = join(tempDir(t), 'log')
  const app = await build(t, {}, standInEnv({ STAND_IN_LOG: log }))
  const refused = await app.inject(run({ host: 'rebind.attacker.example:8080' }))
  t.equal(refused.statusCode, 403)
  t.same(refused.json(), {
    statusCode: 403,
    error: 'Forbidden',
    code: 'HOST_NOT_ALLOWED',
    message: 'Host rebind.attacker.example:8080 is not this service: ' +
      'without API_TOKENS only its own names are served (ALLOWED_HOSTS adds more)'
  })
  t.notOk(existsSync(log), 'no agent started')
  t.equal(app.slots.inUse('crush_run'), 0)
  for (const host of ['127.0.0.1:8080', 'localhost:8080', '[::1]:8080', 'LOCALHOST']) {
    t.equal((await app.inject(run({ host }))).statusCode, 200, `Host ${host}`)
  }
  t.match(
    (await app.inject({ method: 'GET', url: '/runs', headers: { host: 'evil.example' } })).json(),
    { code: 'HOST_NOT_ALLOWED' }, 'every run route'
  )
  t.match(
    (await app.inject({ method: 'GET', url: '/console', headers: { host: 'evil.example' } })).json(),
    { code: 'HOST_NOT_ALLOWED' }, 'the console page too'
  )
  t.equal((await app.inject({ method: 'GET', url: '/console', headers: { host: 'localhost:8080' } })).statusCode, 200)
  for (const url of [
    '/healthz', '/readyz', '/metrics', '/docs', '/docs/json', '/openapi.json', '/openapi.yaml', '/nope'
  ]) {
    t.match(
      (await app.inject({ method: 'GET', url, headers: { host: 'evil.example' } })).json(),
      { statusCode: 403, code: 'HOST_NOT_ALLOWED' }, `${url}: every route, a rebinding page reads none`
    )
    t.match((await app.inject({ method: 'GET', url, headers: { origin: 'https://attacker.example' } })).json(), { statusCode: 403, code: 'ORIGIN_NOT_ALLOWED' }, url)
  }
  t.equal(
    (await app.inject({ method: 'GET', url: '/healthz', headers: { host: '127.0.0.1:8080' } })).statusCode, 200,
    'its own names are served'
  )
})

t.test("without tokens, a browser's Origin must be one of the service's names too", async (t) => {
  const app = await build(t)
  t.match((await app.inject(run({ origin: 'https://attacker.example' }))).json(), { statusCode: 403, code: 'ORIGIN_NOT_ALLOWED' })
  t.match(
    (await app.inject(run({ origin: 'null' }))).json(), { statusCode: 403, code: 'ORIGIN_NOT_ALLOWED' },
    'a sandboxed frame or a local file'
  )
  t.match((await app.inject({ method: 'GET', url: '/console', headers: { origin: 'https://attacker.example' } })).json(), { code: 'ORIGIN_NOT_ALLOWED' }, 'the console page too')
  t.equal((await app.inject(run({ origin: 'http://localhost:8080' }))).statusCode, 200, 'its own pages (Swagger UI) may')
})

t.test('ALLOWED_HOSTS adds names, `*` any; with tokens the token is the lock', async (t) => {
  const named = await build(t, { ALLOWED_HOSTS: 'studio.internal' })
  t.equal((await named.inject(run({ host: 'studio.internal:8080', origin: 'https://studio.internal' }))).statusCode, 200)
  t.equal((await named.inject(run({ host: 'other.internal' }))).statusCode, 403)
  const any = await build(t, { ALLOWED_HOSTS: '*' })
  t.equal((await any.inject(run({ host: 'anything.example' }))).statusCode, 200)
  const tokens = await build(t, { API_TOKENS: 'secret' })
  t.equal((await tokens.inject(run({ host: 'proxy.example.com', authorization: 'Bearer secret' }))).statusCode, 200)
})

t.test('over a real connection, as the attack arrives', async (t) => {
  const base = await listen(t, await build(t))
  const response = await fetch(`${base}/tools/crush_run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: 'http://rebind.attacker.example:8080' },
    body: JSON.stringify({ task: 'x' })
  })
  t.equal(response.status, 403)
  t.match(await response.json(), { code: 'ORIGIN_NOT_ALLOWED' })
})

import t from 'tap'
import { once } from 'node:events'
import { connect, type Socket } from 'node:net'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { build, listen, readPidFile, runTool, scenario, standInEnv, tempDir } from '../helpers/index.js'

/** Sends raw bytes and reads the whole answer, until the server closes the connection. */
async function raw(base: string, bytes: string): Promise<{ status: number; body: any; closed: boolean }> {
  const url = new URL(base)
  const socket: Socket = connect(Number(url.port), url.hostname)
  await once(socket, 'connect')
  let received = ''
  socket.on('data', (chunk: Buffer) => (received += chunk.toString()))
  socket.write(bytes)
  await once(socket, 'close')
  const [head, body] = received.split('\r\n\r\n')
  return { status: Number(head!.split(' ')[1]), body: JSON.parse(body!), closed: true }
}

t.test('a request that trickles in is answered 408 in the shared shape, ' +
  'while a longer run on another connection goes on', async (t) => {
  const app = await build(t, { REQUEST_TIMEOUT_MS: '500' })
  const base = await listen(t, app)
  // A run three times longer than the bound: the bound covers receiving a request, never the run that follows.
  const run = runTool(base, 'crush_run', { task: scenario.sleep(1500) })
  // The two slow requests side by side: each is cut at the bound on its own.
  const [slowBody, slowHeaders] = await Promise.all([
    raw(
      base,
      'POST /tools/crush_run HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\n' +
        'content-length: 100\r\n\r\n{"ta'
    ),
    raw(base, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ')
  ])
  t.same(slowBody, {
    status: 408,
    body: {
      statusCode: 408,
      error: 'Request Timeout',
      code: 'REQUEST_TIMEOUT',
      message: 'The request did not arrive in time (REQUEST_TIMEOUT_MS)'
    },
    closed: true
  })
  t.match(slowHeaders, { status: 408, body: { code: 'REQUEST_TIMEOUT' } }, 'headers too')
  t.match(await run, { ok: true, output: 'slept 1500\n', stop_reason: null })
  t.equal(app.server.maxConnections, 1024, 'connections are capped (MAX_CONNECTIONS)')
})

t.test("Node's own refusals carry a code too", async (t) => {
  const base = await listen(t, await build(t))
  t.match(await raw(base, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nBad\u0001Header: x\r\n\r\n'), {
    status: 400, body: { statusCode: 400, error: 'Bad Request', code: 'MALFORMED_REQUEST', message: /HPE_/ }
  })
  t.match(
    await raw(
      base,
      'POST /tools/crush_run HTTP/1.1\r\nHost: localhost\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n' +
        '\r\n0\r\n\r\n'
    ),
    { status: 400, body: { code: 'MALFORMED_REQUEST' } },
    'Content-Length with Transfer-Encoding (request smuggling)'
  )
  t.match(await raw(base, `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'x'.repeat(20_000)}\r\n\r\n`), {
    status: 431, body: { statusCode: 431, code: 'HEADERS_TOO_LARGE' }
  })
})

t.test("Fastify's own refusals are renamed into documented codes", async (t) => {
  const app = await build(t)
  t.match((await app.inject({ method: 'GET', url: '/runs/%zz' })).json(), { statusCode: 400, code: 'BAD_URL' })
  t.match((await app.inject({ method: 'GET', url: `/runs/${'x'.repeat(101)}` })).json(), {
    statusCode: 414, code: 'URL_TOO_LONG'
  })
})

t.test('once the service is closing, a new request is refused with SHUTTING_DOWN in the shared shape, ' +
  'and starts nothing', async (t) => {
  const dir = tempDir(t)
  const log = join(dir, 'log')
  const app = await build(t, { AGENT_KILL_GRACE_MS: '500' }, standInEnv({ STAND_IN_LOG: log }))
  // A stubborn agent keeps the service closing for its two grace periods.
  const inFlight = runTool(app, 'crush_run', { task: scenario.grandchild(join(dir, 'pid'), { stubborn: true }) })
  await readPidFile(join(dir, 'pid'))
  const closing = app.close()
  const late = await app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: 'too late' } })
  t.same(late.json(), {
    statusCode: 503,
    error: 'Service Unavailable',
    code: 'SHUTTING_DOWN',
    message: 'The service is shutting down: the run was not started'
  })
  t.match(await inFlight, { stop_reason: 'shutdown' }, 'the run in flight was stopped and answered')
  await closing
  const started = readFileSync(log, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { argv: string[] })
  t.equal(started.filter((entry) => entry.argv.includes('too late')).length, 0, 'no agent started for the late request')
})

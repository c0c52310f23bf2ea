import type { InjectOptions } from 'fastify'
import t, { type Test } from 'tap'
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { TASK_MAX_CHARS } from '#src/schemas/run.js'
import { build, echoed, post, standInEnv, tempDir } from '../helpers/index.js'

interface Answer {
  status: number
  body: any
}

function expectError(t: Test, answer: Answer, status: number, code: string, mentions?: RegExp): void {
  t.equal(answer.status, status, `status ${status}`)
  t.same(Object.keys(answer.body).sort(), ['code', 'error', 'message', 'statusCode'], 'the shared error shape')
  t.match(answer.body, { statusCode: status, error: String, code, message: String })
  if (mentions) t.match(answer.body.message, mentions)
}

t.test('invalid bodies get a 400 naming the field, start nothing and take no slot', async (t) => {
  const log = join(tempDir(t), 'starts.log')
  const app = await build(t, { MAX_CRUSH_AGENTS: '1' }, standInEnv({ STAND_IN_LOG: log }))
  const cases: Array<[string, unknown, RegExp]> = [
    ['missing task', {}, /task.*required/],
    ['empty task', { task: '' }, /task/],
    ['task not a string', { task: 42 }, /task must be string/],
    [
      'task over the documented maximum', { task: 'x'.repeat(TASK_MAX_CHARS + 1) }, /task must NOT have more than 30000/
    ],
    ['timeout zero', { task: 'x', timeout: 0 }, /timeout must be >= 1/],
    ['timeout over 1800', { task: 'x', timeout: 1801 }, /timeout must be <= 1800/],
    ['timeout not an integer', { task: 'x', timeout: 1.5 }, /timeout must be integer/],
    ['timeout as a string', { task: 'x', timeout: '60' }, /timeout must be integer/],
    ['task with a NUL byte', { task: 'a\u0000b' }, /task must match pattern/],
    ['task of blanks only', { task: ' \t\r\n ' }, /task must match pattern/],
    ['cwd with a NUL byte', { task: 'x', cwd: '/tmp/\u0000' }, /cwd must match pattern/],
    ['relative cwd', { task: 'x', cwd: 'relative/dir' }, /cwd must match pattern/],
    ['wsl_distro with a space', { task: 'x', wsl_distro: 'Ubuntu 22' }, /wsl_distro must match pattern/],
    ['wsl_distro injection', { task: 'x', wsl_distro: 'a;rm -rf /' }, /wsl_distro must match pattern/],
    [
      'wsl_user with a shell character', { task: 'x', wsl_distro: 'Ubuntu', wsl_user: '$(id)' },
      /wsl_user must match pattern/
    ],
    ['wsl_distro read as an option by wsl.exe', { task: 'x', wsl_distro: '-d' }, /wsl_distro must match pattern/],
    [
      'wsl_user read as an option by wsl.exe', { task: 'x', wsl_distro: 'Ubuntu', wsl_user: '--exec' },
      /wsl_user must match pattern/
    ],
    ['wsl_user without wsl_distro', { task: 'x', wsl_user: 'bob' }, /wsl_distro when property wsl_user is present/],
    ['unknown field', { task: 'x', temperature: 0.2 }, /body\/temperature is not an accepted field/],
    ['a password field', { task: 'x', password: 'hunter2' }, /body\/password is not an accepted field/],
    ['an array body', ['x'], /body must be object/]
  ]
  for (const [name, body, mentions] of cases) {
    for (const tool of ['crush_run', 'claude_run']) {
      const answer = await post(app, tool, body)
      t.test(`${tool}: ${name}`, async (t) => expectError(t, answer, 400, 'VALIDATION_ERROR', mentions))
    }
  }
  t.equal(app.slots.inUse('crush_run'), 0, 'no slot held')
  t.notOk(existsSync(log), 'no agent started')
  t.equal((await post(app, 'crush_run', { task: 'still works' })).status, 200, 'the single slot is still free')
})

t.test('cwd is checked on the host before anything runs, ' +
  'and a WSL distro asked of a host that has none is refused', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'a-file')
  writeFileSync(file, '')
  const log = join(dir, 'starts.log')
  const app = await build(t, {}, standInEnv({ STAND_IN_LOG: log }))
  expectError(
    t, await post(app, 'crush_run', { task: 'x', cwd: join(dir, 'missing') }), 400, 'CWD_NOT_FOUND', /missing/
  )
  expectError(t, await post(app, 'claude_run', { task: 'x', cwd: file }), 400, 'CWD_NOT_A_DIRECTORY', /a-file/)
  // Not ignored: a run that asked for a distro would otherwise run on this host, as the service's user.
  expectError(
    t, await post(app, 'crush_run', { task: 'x', wsl_distro: 'Ubuntu', wsl_user: 'dev' }), 400, 'WSL_NOT_AVAILABLE',
    /runs on linux/
  )
  t.notOk(existsSync(log), 'no agent started')
  t.equal(app.slots.inUse('crush_run') + app.slots.inUse('claude_run'), 0)
})

t.test('transport errors share the shape: 404, 413, 415, malformed JSON', async (t) => {
  const app = await build(t)
  const ask = async (options: InjectOptions) => {
    const response = await app.inject(options)
    return { status: response.statusCode, body: response.json() }
  }
  expectError(
    t, await ask({ method: 'POST', url: '/tools/unknown_run', payload: { task: 'x' } }), 404, 'ROUTE_NOT_FOUND'
  )
  expectError(t, await ask({ method: 'GET', url: '/tools/crush_run' }), 404, 'ROUTE_NOT_FOUND')
  expectError(
    t,
    await ask({ method: 'POST', url: '/tools/crush_run', payload: { task: 'x'.repeat(600 * 1024) } }),
    413,
    'BODY_TOO_LARGE'
  )
  expectError(
    t,
    await ask({ method: 'POST', url: '/tools/crush_run', headers: { 'content-type': 'text/plain' }, payload: 'do it' }),
    415,
    'UNSUPPORTED_MEDIA_TYPE'
  )
  expectError(
    t,
    await ask({
      method: 'POST', url: '/tools/crush_run', headers: { 'content-type': 'application/json' }, payload: '{"task":'
    }),
    400,
    'INVALID_JSON'
  )
  expectError(
    t,
    await ask({
      method: 'POST', url: '/tools/crush_run', headers: { 'content-type': 'application/json' }, payload: ''
    }),
    400,
    'INVALID_JSON'
  )
  expectError(t, await ask({ method: 'POST', url: '/tools/crush_run' }), 400, 'VALIDATION_ERROR', /body must be object/)
})

t.test('the longest task fits however it is escaped: 30,000 emoji sent as \\uXXXX pairs', async (t) => {
  const app = await build(t)
  const task = '😀'.repeat(30_000)
  const payload = `{"task":"${'\\ud83d\\ude00'.repeat(30_000)}"}`
  t.ok(Buffer.byteLength(payload) > 350_000, `${Buffer.byteLength(payload)} bytes of JSON`)
  const response = await app.inject({
    method: 'POST', url: '/tools/crush_run', payload, headers: { 'content-type': 'application/json' }
  })
  t.equal(response.statusCode, 200)
  t.equal(echoed(response.json()).prompt, task, 'it reached the agent whole')
  const over = await app.inject({
    method: 'POST',
    url: '/tools/crush_run',
    payload: `{"task":"${'\\ud83d\\ude00'.repeat(30_001)}"}`,
    headers: { 'content-type': 'application/json' }
  })
  t.match(over.json(), {
    statusCode: 400, code: 'VALIDATION_ERROR', message: /task must NOT have more than 30000 characters/
  })
})

t.test("a caller's x-request-id is kept when it is a plain token, replaced otherwise", async (t) => {
  const app = await build(t)
  const idOf = async (id: string) =>
    (await app.inject({ method: 'GET', url: '/tools', headers: { 'x-request-id': id } })).headers['x-request-id']
  t.equal(await idOf('studio-req-42'), 'studio-req-42')
  t.match(await idOf('x'.repeat(129)), /^[0-9a-f-]{36}$/, 'too long')
  t.match(await idOf('a b\u00e9'), /^[0-9a-f-]{36}$/, 'not a plain token')
})

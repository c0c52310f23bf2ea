import t from 'tap'
import { once } from 'node:events'
import { join } from 'node:path'
import { build, isAlive, listen, readPidFile, startServer, tempDir } from './helper.js'
import { NO_REDIS, redisEnv, startRedis } from './redis.js'

// Two real service processes on one real redis-server: any replica answers for any run.

const ALICE = { authorization: 'Bearer alice-secret' }
const BOB = { authorization: 'Bearer bob-secret' }
const TOKENS = 'alice:alice-secret,bob:bob-secret'

async function createRun(base: string, task: string): Promise<string> {
  const response = await fetch(`${base}/runs`, {
    method: 'POST',
    headers: { ...ALICE, 'content-type': 'application/json' },
    body: JSON.stringify({ tool: 'crush_run', task })
  })
  return ((await response.json()) as { id: string }).id
}

const stateOn = async (base: string, id: string, headers = ALICE) => {
  const response = await fetch(`${base}/runs/${id}`, { headers })
  return { status: response.status, body: (await response.json()) as Record<string, any> }
}

/** Reads an SSE stream until `pattern` shows up in it, then stops reading. */
async function readUntil(response: Response, pattern: RegExp): Promise<string> {
  const reader = response.body!.getReader()
  let text = ''
  while (!pattern.test(text)) {
    const { value, done } = await reader.read()
    if (done) break
    text += Buffer.from(value).toString()
  }
  await reader.cancel()
  return text
}

t.test('a fleet on Redis', { skip: NO_REDIS }, async (t) => {
  t.test('POST on A; GET, follow live and DELETE on B; the agent on A stops; other tokens see nothing', async (t) => {
    const { url } = await startRedis(t)
    const env = redisEnv(url, { API_TOKENS: TOKENS })
    const a = await startServer(t, env)
    const b = await startServer(t, env)
    const pidFile = join(tempDir(t), 'agent.pid')
    const id = await createRun(a.base, `@drip 100000 20 ${pidFile}`)
    const agent = await readPidFile(pidFile)

    t.match(await stateOn(b.base, id), { status: 200, body: { id, kind: 'async', status: 'running', result: null } }, 'B knows the run A runs')
    const following = await fetch(`${b.base}/runs/${id}/events`, { headers: ALICE })
    t.equal(following.status, 200)
    const seen = await readUntil(following, /tick 3\\n/)
    t.match(seen, /^id: \d+\nevent: output\ndata: \{"type":"output","id":\d+,"offset":0,"data":"tick 1\\n/, 'from the start…')
    t.match(seen, /tick 3/, '…and live, as A writes it')

    t.match(await stateOn(b.base, id, BOB), { status: 404, body: { code: 'RUN_NOT_FOUND' } }, 'another token: no such run')
    t.same(await (await fetch(`${b.base}/runs`, { headers: BOB })).json(), { runs: [] }, 'and an empty list')
    t.match(await (await fetch(`${b.base}/runs`, { headers: ALICE })).json(), { runs: [{ id, status: 'running' }] })

    const cancelled = await fetch(`${b.base}/runs/${id}`, { method: 'DELETE', headers: ALICE })
    t.equal(cancelled.status, 200)
    t.match(await cancelled.json(), { id, status: 'cancelled', result: { stop_reason: 'cancelled' } }, 'B answers with the end A recorded')
    t.notOk(isAlive(agent), 'the agent on A is gone')
    t.match(await stateOn(a.base, id), { body: { status: 'cancelled' } }, 'A says the same')
  })

  t.test('kill -9 A: after the TTL, B reports A’s run lost, with the events A had saved', async (t) => {
    const { url } = await startRedis(t)
    const env = redisEnv(url, { SLOTS_TTL_MS: '600' })
    const a = await startServer(t, env)
    const b = await startServer(t, env)
    const pidFile = join(tempDir(t), 'agent.pid')
    const id = await createRun(a.base, `@drip 100000 20 ${pidFile}`)
    const agent = await readPidFile(pidFile)
    t.teardown(() => isAlive(agent) && process.kill(-agent, 'SIGKILL'))
    // Saved events show on B: what A had written by then is in Redis.
    await readUntil(await fetch(`${b.base}/runs/${id}/events`), /tick 2/)
    const exited = once(a.child, 'exit')
    a.child.kill('SIGKILL')
    await exited

    let state = (await stateOn(b.base, id)).body
    for (let attempt = 0; state['status'] === 'running' && attempt < 200; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      state = (await stateOn(b.base, id)).body
    }
    t.match(state, { id, status: 'lost', finished_at: String, result: null })
    const kept = await (await fetch(`${b.base}/runs/${id}/events`)).text()
    t.match(kept, /"offset":0,"data":"tick 1\\n/, 'the output A had saved')
    t.notMatch(kept, /event: result/)
  })

  t.test('in one process pair: B follows A’s run live to its end and DELETE of a finished run answers it as it is', async (t) => {
    const { url } = await startRedis(t)
    const env = redisEnv(url)
    const a = await build(t, env)
    const b = await build(t, env)
    const created = await a.inject({ method: 'POST', url: '/runs', payload: { tool: 'crush_run', task: '@drip 5 100' } })
    const { id } = created.json()
    const followed = await (await fetch(`${await listen(t, b)}/runs/${id}/events`)).text()
    const data = [...followed.matchAll(/^data: (\{"type":"output".*)$/gm)].map((match) => JSON.parse(match[1]!).data).join('')
    t.equal(data, 'tick 1\ntick 2\ntick 3\ntick 4\ntick 5\ndripped\n', 'every byte of output, as A saved it while it ran')
    t.match(followed, /event: result\ndata: \{"type":"result","id":\d+,"result":\{"tool":"crush_run","ok":true/, 'then the result')
    const ended = await b.inject({ method: 'DELETE', url: `/runs/${id}` })
    t.match(ended.json(), { id, status: 'succeeded' }, 'a finished run is answered as it is')
  })

  t.test('in one process pair: DELETE on B waits for A to stop the agent and record its end', async (t) => {
    const { url } = await startRedis(t)
    const env = redisEnv(url, { AGENT_KILL_GRACE_MS: '200' })
    const a = await build(t, env)
    const b = await build(t, env)
    const pidFile = join(tempDir(t), 'agent.pid')
    const { id } = (await a.inject({ method: 'POST', url: '/runs', payload: { tool: 'crush_run', task: `@grandchild ${pidFile} stubborn` } })).json()
    const grandchild = await readPidFile(pidFile)
    const ended = await b.inject({ method: 'DELETE', url: `/runs/${id}` })
    t.match(ended.json(), { id, status: 'cancelled', finished_at: String, result: { stop_reason: 'cancelled' } })
    t.notOk(isAlive(grandchild), 'the stubborn grandchild on A is gone too')
  })
})

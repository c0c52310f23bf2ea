import t from 'tap'
import { once } from 'node:events'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { build, listen, readPidFile, startServer, tempDir } from './helper.js'
import { freePort, NO_REDIS, redisEnv, startRedis } from './redis.js'

const runOn = async (base: string, task: string) => {
  const response = await fetch(`${base}/tools/crush_run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task }) })
  return { status: response.status, body: await response.json() }
}

t.test('redis-backed slots', { skip: NO_REDIS }, async (t) => {
  t.test('two instances share one limit under concurrent load', async (t) => {
    const { url } = await startRedis(t)
    const dir = tempDir(t)
    const env = redisEnv(url, { MAX_CRUSH_AGENTS: '3' })
    const a = await build(t, env)
    const b = await build(t, env)
    const bases = [await listen(t, a), await listen(t, b)]
    const answers = await Promise.all(Array.from({ length: 40 }, (_, index) => runOn(bases[index % 2]!, `@record ${dir} 300`)))
    t.same([...new Set(answers.map((answer) => answer.status))].sort(), [200, 429])
    const events = readdirSync(dir)
      .filter((name) => name.endsWith('.start'))
      .flatMap((name) => {
        const pid = name.slice(0, -'.start'.length)
        return [
          { at: BigInt(readFileSync(join(dir, `${pid}.start`), 'utf8')), delta: 1 },
          { at: BigInt(readFileSync(join(dir, `${pid}.end`), 'utf8')), delta: -1 }
        ]
      })
      .sort((x, y) => (x.at === y.at ? x.delta - y.delta : x.at < y.at ? -1 : 1))
    let running = 0
    let most = 0
    for (const event of events) most = Math.max(most, (running += event.delta))
    t.ok(most <= 3, `at most ${most} agents ran at once across both instances`)
    t.equal(events.length / 2, answers.filter((answer) => answer.status === 200).length)
    const tools = (await a.inject({ method: 'GET', url: '/tools' })).json().tools
    t.match(tools[0], { name: 'crush_run', limit: 3, in_use: 0, free: 3 }, 'every slot came back')
    t.match((await a.inject({ method: 'GET', url: '/readyz' })).json(), { status: 'ready', slots: { backend: 'redis', ok: true } })
  })

  t.test('a live run keeps its slot past the TTL; a crashed instance’s slot comes back after it', async (t) => {
    const { url } = await startRedis(t)
    const dir = tempDir(t)
    const env = redisEnv(url, { MAX_CRUSH_AGENTS: '1', SLOTS_TTL_MS: '600' })
    const survivor = await build(t, env)

    // A run three TTLs long on one instance: the other is refused all along, so the slot was refreshed.
    const { base } = await startServer(t, env)
    const longRun = runOn(base, `@write-pid ${join(dir, 'a.pid')} 2000`)
    await readPidFile(join(dir, 'a.pid'))
    await new Promise((resolve) => setTimeout(resolve, 1500))
    t.equal((await survivor.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: 'x' } })).statusCode, 429, 'still held at 2.5 TTLs')
    t.equal((await longRun).status, 200)

    // Now the holder crashes mid-run.
    const crashing = await startServer(t, env)
    const inFlight = runOn(crashing.base, `@write-pid ${join(dir, 'b.pid')} 60000`).catch(() => null)
    const agent = await readPidFile(join(dir, 'b.pid'))
    t.teardown(() => process.kill(-agent, 'SIGKILL'))
    crashing.child.kill('SIGKILL')
    await inFlight
    t.equal((await survivor.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: 'x' } })).statusCode, 429, 'the dead instance still holds it')
    // Polling, as a caller would: the answer turns from 429 to 200 once the TTL has passed.
    let status = 0
    for (let attempt = 0; attempt < 100 && status !== 200; attempt++) {
      if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, 100))
      status = (await survivor.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: 'x' } })).statusCode
    }
    t.equal(status, 200, 'the slot came back after the TTL')
  })

  t.test('Redis gone: a prompt 503 SLOTS_UNAVAILABLE, never a hang; readyz says so', async (t) => {
    const { url, stop } = await startRedis(t)
    const app = await build(t, redisEnv(url, { SLOTS_TTL_MS: '600' }))
    // A run in flight when Redis goes away is not disturbed: its slot just cannot be refreshed or given back.
    const inFlight = app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: '@sleep 1500' } })
    await new Promise((resolve) => setTimeout(resolve, 300))
    await stop()
    t.match((await inFlight).json(), { ok: true, output: 'slept 1500\n' }, 'the run in flight ended normally')
    const refused = await app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: 'x' } })
    t.equal(refused.statusCode, 503)
    t.match(refused.json(), { statusCode: 503, code: 'SLOTS_UNAVAILABLE', message: /Redis/ })
    const ready = await app.inject({ method: 'GET', url: '/readyz' })
    t.equal(ready.statusCode, 503)
    t.match(ready.json(), { status: 'unavailable', slots: { backend: 'redis', ok: false, error: String } })
    t.equal((await app.inject({ method: 'GET', url: '/tools' })).json().code, 'SLOTS_UNAVAILABLE')
    t.equal((await app.inject({ method: 'POST', url: '/runs', payload: { tool: 'crush_run', task: 'x' } })).json().code, 'SLOTS_UNAVAILABLE')
  })

  t.test('Redis restarted mid-run, its data lost: the run ends normally, and the slots work again', async (t) => {
    const first = await startRedis(t)
    const app = await build(t, redisEnv(first.url, { SLOTS_TTL_MS: '600', MAX_CRUSH_AGENTS: '1' }))
    const inFlight = app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: '@sleep 2500' } })
    await new Promise((resolve) => setTimeout(resolve, 300))
    await first.stop()
    await startRedis(t, first.port)
    // The run's next refresh finds its slot gone (an empty Redis): it is reported lost, and the run goes on.
    t.match((await inFlight).json(), { ok: true, output: 'slept 2500\n' })
    t.equal((await app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: 'x' } })).statusCode, 200)
  })
})

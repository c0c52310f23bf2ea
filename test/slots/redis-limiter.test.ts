import t from 'tap'
import { mkdirSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  build, buildLogged, call, heldAgent, listen, post, readPidFile, runTool, scenario, startServer, tempDir, until,
  waitFor
} from '../helpers/index.js'
import { NO_REDIS, redisEnv, slowAtFirst, startRedis } from '../helpers/redis.js'
import { pino } from 'pino'
import { RedisSlotLimiter } from '#src/slots/redis-limiter.js'
import { SlotQueue } from '#src/slots/queue.js'
import type { SlotLease } from '#src/slots/limiter.js'

// Slots shared by a fleet (src/slots/redis-limiter.ts): one limit across replicas, kept by a live run past its TTL,
// given back by a crashed replica's TTL, and a prompt 503 rather than a hang when Redis is away.

/** The monotonic times the `record` scenario wrote in `dir`, one per agent, in order. */
const recorded = (dir: string, edge: 'start' | 'end'): bigint[] =>
  readdirSync(dir)
    .filter((name) => name.endsWith(`.${edge}`))
    .map((name) => readFileSync(join(dir, name), 'utf8'))
    // A file still being written reads empty: its time comes on the next read.
    .filter((time) => time !== '')
    .map(BigInt)
    .sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))

t.test('redis-backed slots', { skip: NO_REDIS, jobs: 2 }, async (t) => {
  // Two groups side by side, each test in a group after the other: the slot counts, TTLs and the burst of 40 requests
  // in one; Redis stopped and restarted under a run in the other.
  t.test('the limit, across instances and past the TTL', async (t) => {
    t.test('two instances share one limit under concurrent load', async (t) => {
      const { url } = await startRedis(t)
      const dir = tempDir(t)
      const env = redisEnv(url, { MAX_CRUSH_AGENTS: '3' })
      const a = await build(t, env)
      const b = await build(t, env)
      const bases = [await listen(t, a), await listen(t, b)]
      const answers = await Promise.all(
        Array.from(
          { length: 40 }, (_, index) => post(bases[index % 2]!, 'crush_run', { task: scenario.record(dir, 300) })
        )
      )
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
      const tools = (await call(a, 'GET', '/tools')).body.tools
      t.match(tools[0], { name: 'crush_run', limit: 3, in_use: 0, free: 3 }, 'every slot came back')
      t.match((await call(a, 'GET', '/readyz')).body, { status: 'ready', slots: { backend: 'redis', ok: true } })
    })

    t.test('a slot given back on one replica goes to a run waiting on another as it is given back', async (t) => {
      const { url } = await startRedis(t)
      const options = { url, ttlMs: 30_000, keyPrefix: 'freed:', log: pino({ level: 'silent' }) }
      const [here, there] = [new RedisSlotLimiter({ tool: 1 }, options), new RedisSlotLimiter({ tool: 1 }, options)]
      t.teardown(async () => { await Promise.all([here.close(), there.close()]) })
      // Never asking again while the test lasts: only being told can serve the run waiting here.
      const queue = new SlotQueue(here, { tool: 10 }, { retryEveryMs: 3_600_000 })
      const held = (await there.acquire('tool'))!
      const stop = new AbortController()
      const waiting = queue.acquire('tool', { waitMs: 60_000, stop: { stopped: false, signal: stop.signal } })
      await until(async () => queue.queued('tool'), (queued) => queued === 1, 10_000, 'the run to wait')
      held.release()
      const served = await Promise.race([
        waiting,
        new Promise<'not told'>((resolve) => setTimeout(() => { resolve('not told') }, 10_000).unref())
      ])
      t.not(served, 'not told', 'the waiting run got the slot')
      ;(served as { lease: SlotLease }).lease.release()
      stop.abort()
    })

    t.test('a live run keeps its slot past the TTL; a crashed instance’s slot comes back after it', async (t) => {
      const { url } = await startRedis(t)
      const dir = tempDir(t)
      // Long enough that a loaded machine's stalls (a refresh every third of it) do not lose the slot: at 600 ms, a CI
      // run once lost it while its holder ran. That is what a TTL means, and why the default is 30 s.
      const ttl = 2000
      const env = redisEnv(url, { MAX_CRUSH_AGENTS: '1', SLOTS_TTL_MS: String(ttl) })
      // Two in-process instances for the live run, a service of its own to crash; started side by side.
      const [holder, survivor, crashing] = await Promise.all([build(t, env), build(t, env), startServer(t, env)])

      // A run three TTLs long on one instance; the other asks all along, and is refused all along: the slot was
      // refreshed.
      // Who ran when is read from the agents' own records (the monotonic clock every process shares), not from when the
      // answers arrived: the holder's slot comes back before its answer does, so an ask may rightly win it in between.
      const holderDir = join(dir, 'holder')
      const askDir = join(dir, 'asks')
      mkdirSync(holderDir)
      mkdirSync(askDir)
      const longRun = runTool(holder, 'crush_run', { task: scenario.record(holderDir, 3 * ttl) })
      const [holderStart] = await until(
        () => recorded(holderDir, 'start'), (starts) => starts.length === 1, 10_000, 'the holder to start'
      )
      const answers: Array<{ status: number; at: bigint }> = []
      let finished = false
      void longRun.finally(() => (finished = true))
      const running = () => !finished
      while (running()) {
        const { status } = await post(survivor, 'crush_run', { task: scenario.record(askDir, 0) })
        answers.push({ status, at: process.hrtime.bigint() })
        // A caller asking again now and then, not a tight loop against Redis.
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      t.match(await longRun, { ok: true })
      const [holderEnd] = recorded(holderDir, 'end')
      const heldForMs = Number(holderEnd! - holderStart!) / 1e6
      t.ok(heldForMs > 2 * ttl, `the holder ran ${Math.round(heldForMs)} ms, over two TTLs`)
      const lastRefused = answers.filter((answer) => answer.status === 429).at(-1)?.at ?? holderStart!
      const lastRefusedMs = Number(lastRefused - holderStart!) / 1e6
      t.ok(lastRefusedMs > ttl, `still refused ${Math.round(lastRefusedMs)} ms after it started, past the TTL`)
      const whileHeld = answers.filter((answer) => answer.at < holderEnd!)
      t.ok(whileHeld.length >= 1, `${whileHeld.length} asks answered while it ran`)
      t.same([...new Set(whileHeld.map((answer) => answer.status))], [429], 'every one refused')
      const overlapping = recorded(askDir, 'start').filter((start) => start < holderEnd!)
      t.same(overlapping, [], 'no agent of the other instance started before the holder ended')

      // Now the holder crashes mid-run.
      const inFlight = post(crashing.base, 'crush_run', {
        task: scenario.writePid(join(dir, 'b.pid'), 60000)
      }).catch(() => null)
      const agent = await readPidFile(join(dir, 'b.pid'))
      t.teardown(() => process.kill(-agent, 'SIGKILL'))
      crashing.child.kill('SIGKILL')
      await inFlight
      const crashedAt = Date.now()
      t.equal((await post(survivor, 'crush_run', { task: 'x' })).status, 429, 'the dead instance still holds it')
      // Polling, as a caller would: the answer turns from 429 to 200 once the TTL has passed.
      const status = await until(
        async () => (await post(survivor, 'crush_run', { task: 'x' })).status, (answer) => answer !== 429, 10_000,
        'the slot to come back'
      )
      t.equal(status, 200, 'the slot came back after the TTL')
      t.ok(Date.now() - crashedAt < 10 * ttl, 'within a few TTLs')
    })
  })

  t.test('Redis away, then back', async (t) => {
    t.test('Redis gone: a prompt 503 SLOTS_UNAVAILABLE, never a hang; readyz says so', async (t) => {
      const { url, stop } = await startRedis(t)
      const { app, lines } = await buildLogged(t, redisEnv(url, { SLOTS_TTL_MS: '2000' }))
      // A run in flight when Redis goes away is not disturbed: its slot just cannot be refreshed or given back. Redis
      // stops once the run holds its slot and its agent runs (stopping it earlier would refuse the run instead), and
      // the agent ends once a refresh has failed under it (or none is left to fail: a stall past its TTL lost it).
      const held = heldAgent(t)
      const inFlight = runTool(app, 'crush_run', { task: held.task })
      await readPidFile(held.pidFile)
      await stop()
      await waitFor(() => lines.some((line) => /could not refresh an agent slot|an agent slot was lost/.test(line)),
        10_000, 'a refresh to fail')
      held.release()
      t.match(await inFlight, { ok: true, output: 'released\n' }, 'the run in flight ended normally')
      // Asked together: each answers within Redis's own timeout, none waits for another.
      const [refused, ready, tools, runs] = await Promise.all([
        call(app, 'POST', '/tools/crush_run', { body: { task: 'x' } }),
        call(app, 'GET', '/readyz'),
        call(app, 'GET', '/tools'),
        call(app, 'POST', '/runs', { body: { tool: 'crush_run', task: 'x' } })
      ])
      t.equal(refused.status, 503)
      t.match(refused.body, { statusCode: 503, code: 'SLOTS_UNAVAILABLE', message: /Redis/ })
      t.equal(ready.status, 503)
      t.match(ready.body, { status: 'unavailable', slots: { backend: 'redis', ok: false, error: String } })
      t.match(tools.body, { code: 'SLOTS_UNAVAILABLE' })
      t.match(runs.body, { code: 'SLOTS_UNAVAILABLE' })
    })

    t.test('REDIS_TIMEOUT_MS bounds each Redis call: a Redis slower than it is a 503, ' +
      'and given more time the same Redis serves', async (t) => {
      const { url } = await startRedis(t)
      // Answers 600 ms late: within the default bound (1 s), not within 300 ms.
      const impatient = await build(t, redisEnv(await slowAtFirst(t, url, 60_000, 600), { REDIS_TIMEOUT_MS: '300' }))
      t.match(await post(impatient, 'crush_run', { task: 'x' }), {
        status: 503, body: { code: 'SLOTS_UNAVAILABLE', message: /Redis/ }
      })
      // Answers 1.1 s late: past the default bound, well within 5 s.
      const patient = await build(t, redisEnv(await slowAtFirst(t, url, 60_000, 1100), { REDIS_TIMEOUT_MS: '5000' }))
      t.match(
        await post(patient, 'crush_run', { task: 'x' }), { status: 200, body: { ok: true } },
        'each call waited for the slow answer'
      )
    })

    t.test('Redis restarted mid-run, its data lost: the run ends normally, and the slots work again', async (t) => {
      const first = await startRedis(t)
      const { app, lines } = await buildLogged(t, redisEnv(first.url, { SLOTS_TTL_MS: '600', MAX_CRUSH_AGENTS: '1' }))
      const held = heldAgent(t)
      const inFlight = runTool(app, 'crush_run', { task: held.task })
      await readPidFile(held.pidFile)
      await first.stop()
      await startRedis(t, first.port)
      // The run's next refresh finds its slot gone (an empty Redis): it is reported lost, and the run goes on.
      await waitFor(() => lines.some((line) => line.includes('an agent slot was lost')), 10_000, 'the slot to be lost')
      held.release()
      t.match(await inFlight, { ok: true, output: 'released\n' })
      // As a caller would: asked again until the service has reconnected (ioredis backs off up to a second or so).
      t.equal(
        await until(
          async () => (await post(app, 'crush_run', { task: 'x' })).status, (status) => status === 200, 10_000,
          'the slots to work again'
        ),
        200
      )
    })
  })
})

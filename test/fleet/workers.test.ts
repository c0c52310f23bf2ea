import t, { type Test } from 'tap'
import { Redis } from 'ioredis'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  call, cancelRun, createRun, echoed, heldAgent, isAlive, openStream, outputText, parseNdjson, readPidFile, readUntil,
  runTool, scenario, settled, startServer, tempDir, TEST_AGENT_ENV_ALLOW, until, type ResultEvent, type RunEvent,
  type Started
} from '../helpers/index.js'
import { webhookReceiver } from '../helpers/webhook-receiver.js'
import type { RunSummary } from '../generated/openapi.js'
import { NO_REDIS, redisEnv, startRedis } from '../helpers/redis.js'
import { inUse, NO_AGENT_HERE } from './fleet-hosts.js'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { agentVariables } from '#src/agents/spec.js'
import type { FleetMember } from '#src/schemas/health.js'

// ROLE=api hands async runs to ROLE=worker processes through the fleet's queues (issue 40): real service processes on
// a real redis-server, each worker's stand-ins logging their starts to a file of its own, so the test can tell who ran
// what.

const ALICE = { authorization: 'Bearer alice-secret' }
const TOKENS = 'alice:alice-secret'

interface Fleet {
  /** The fleet's Redis, and its keys' prefix. */
  redis: { url: string; prefix: string }
  api: Started
  /** Every API replica, `api` first. */
  apis: Started[]
  workers: Array<Started & { starts: () => string[]; healthFile: string }>
  apiStarts: () => string[]
}

/** The tasks the stand-ins were started with, from their log (one line per start; readiness probes left out). */
const startsIn = (log: string) => (): string[] => existsSync(log)
  ? readFileSync(log, 'utf8').split('\n').filter((line) => line.includes('"argv"'))
    .map((line) => (JSON.parse(line) as { argv: string[] }).argv)
    .filter((argv) => argv[0] !== '--version').map((argv) => argv.at(-1)!)
  : []

/** The last worker's host has no codex. */
const NO_CODEX_HERE = { [agentVariables(BUILT_IN_AGENTS.find((spec) => spec.agent === 'codex')!).bin]: 'no-codex-here' }

/**
 * `apis` API replicas (with no agent of their own) and `workers` workers on a Redis of the test's own (the last one
 * without codex); crush's fleet limit 2, one run per worker.
 */
async function fleet(t: Test, workers = 2, extra: Record<string, string> = {}, apis = 1): Promise<Fleet> {
  const { url } = await startRedis(t)
  const env = redisEnv(url, {
    API_TOKENS: TOKENS,
    MAX_CRUSH_AGENTS: '2',
    WORKER_MAX_CRUSH_AGENTS: '1',
    AGENT_ENV_ALLOW: TEST_AGENT_ENV_ALLOW,
    ...extra
  })
  const logs = Array.from({ length: workers + 1 }, (_, index) => join(tempDir(t), `starts-${index}.log`))
  const [api, ...others] = await Promise.all([
    ...Array.from({ length: apis }, () => startServer(t, {
      ...env, ...NO_AGENT_HERE, ROLE: 'api', STAND_IN_LOG: logs[0]!
    })),
    ...logs.slice(1).map((log, index) => startServer(t, {
      ...env,
      ...(index === workers - 1 ? NO_CODEX_HERE : {}),
      ROLE: 'worker',
      STAND_IN_LOG: log,
      HEALTH_FILE: `${log}.alive`
    }))
  ])
  const taking = others.slice(apis - 1)
  return {
    redis: { url, prefix: env.SLOTS_KEY_PREFIX },
    api: api!,
    apis: [api!, ...others.slice(0, apis - 1)],
    workers: taking.map((worker, index) => ({
      ...worker, starts: startsIn(logs[index + 1]!), healthFile: `${logs[index + 1]!}.alive`
    })),
    apiStarts: startsIn(logs[0]!)
  }
}

/** The fleet's roll, as the API replica's /readyz tells it to a token holder. */
async function rollOf(base: string): Promise<FleetMember[]> {
  const { body } = await call(base, 'GET', '/readyz', { headers: ALICE })
  return (body as { fleet: { members: FleetMember[] } }).fleet.members
}

/** The runs of crush waiting for a slot, as GET /tools says: across the fleet. */
async function queuedOf(base: string): Promise<number> {
  const { body } = await call(base, 'GET', '/tools', { headers: ALICE })
  return (body as { tools: Array<{ name: string; queued: number }> }).tools.find((each) => each.name === 'crush_run')!
    .queued
}

/** The runs of crush waiting on this replica, as its /metrics says. */
async function ownQueuedOf(base: string): Promise<number> {
  return Number(/agent_runner_queued\{tool="crush_run"\} (\d+)/.exec(await metricsOf(base))?.[1])
}

interface SpanLine { marker: string; event: 'start' | 'end'; at: number }

/** What the `span` stand-ins wrote: each start and end, with its marker. */
const spansIn = (log: string): SpanLine[] => existsSync(log)
  ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as SpanLine)
  : []

/** The most spans alive at once: starts and ends in time order (one ending as another starts, not both alive). */
function mostAtOnce(lines: readonly SpanLine[]): number {
  let alive = 0
  let most = 0
  const inOrder = [...lines].sort((a, b) => a.at - b.at || (a.event === 'end' ? -1 : 1))
  for (const { event } of inOrder) {
    alive += event === 'start' ? 1 : -1
    most = Math.max(most, alive)
  }
  return most
}

async function metricsOf(base: string): Promise<string> {
  const response = await fetch(`${base}/metrics`)
  return await response.text()
}

// One fleet for the whole file, each case with tasks of its own (three service processes cost seconds of CPU to start);
// the case that kills a worker comes last. Slots live 2 s unrenewed: a killed worker's run is lost soon after.
t.test('ROLE=api hands async runs to ROLE=worker processes', { skip: NO_REDIS }, async (t) => {
  const { redis, api, apis, workers, apiStarts } = await fleet(t, 3, {
    WEBHOOK_SECRET: `whsec_${randomBytes(32).toString('base64')}`,
    WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
    SLOTS_TTL_MS: '2000',
    WORKER_MAX_CLAUDE_AGENTS: '0',
    WORKER_MAX_GEMINI_AGENTS: '0',
    WORKER_MAX_OPENCODE_AGENTS: '0'
  }, 2)
  const ranOnWorkers = (): string[] => workers.flatMap((worker) => worker.starts())
  // What a replica running its runs itself answers, for the same requests.
  const local = await startServer(t, { API_TOKENS: TOKENS, AGENT_ENV_ALLOW: TEST_AGENT_ENV_ALLOW })

  t.test('each run is run once, by a worker, never by the API replica; its record is read back there, and it is ' +
    'counted there', async (t) => {
    const tasks = ['first task', 'second task', 'third task', 'fourth task']
    // A worker listens to nothing: the API replica that was asked for a run is where /metrics counts it.
    const succeeded = async (): Promise<number> => Number(
      /agent_runner_runs_total\{tool="crush_run",outcome="succeeded"\} (\d+)/.exec(await metricsOf(api.base))?.[1] ?? 0
    )
    const before = await succeeded()
    const created = []
    for (const task of tasks) {
      created.push(await createRun(api.base, { tool: 'crush_run', task, queue_timeout: 60 }, ALICE))
    }
    const ended = await Promise.all(created.map(({ id }) => settled(api.base, id, 30_000, ALICE)))
    for (const [index, state] of ended.entries()) {
      t.match(state, { status: 'succeeded', result: { ok: true, output: new RegExp(tasks[index]!) } }, tasks[index]!)
    }
    t.same([...ranOnWorkers()].sort(), [...tasks].sort(), 'each task started once, on a worker')
    t.same(apiStarts(), [], 'none on the API replica')
    const counted = await until(succeeded, (count) => count >= before + tasks.length, 10_000, 'them to be counted')
    t.equal(counted, before + tasks.length, 'each counted once, by the API replica, from the record its worker stored')
  })

  t.test('the fleet’s roll: /readyz lists each member and what it takes, /metrics counts them; liveness', async (t) => {
    const { status, body } = await call(api.base, 'GET', '/readyz', { headers: ALICE })
    t.equal(status, 200, 'ready with no agent of its own: its workers run them')
    const { agents } = body as { agents: Array<{ path: string | null }> }
    t.same(agents.map(({ path }) => path), BUILT_IN_AGENTS.map(() => null), 'none found on the API replica')
    const { members } = (body as { fleet: { members: FleetMember[] } }).fleet
    const described = (each: Pick<FleetMember, 'role' | 'agents'>[]): string[] =>
      each.map(({ role, agents }) => JSON.stringify({ role, agents })).sort()
    t.same(
      described(members),
      described([
        { role: 'api', agents: {} },
        { role: 'api', agents: {} },
        { role: 'worker', agents: { crush_run: 1, codex_run: 2 } },
        { role: 'worker', agents: { crush_run: 1, codex_run: 2 } },
        { role: 'worker', agents: { crush_run: 1 } }
      ]),
      'the API replica takes nothing; each worker one crush run at a time, codex up to its limit where installed, ' +
        'no tool at 0'
    )
    t.equal(new Set(members.map((member) => member.id)).size, workers.length + apis.length, 'each member once')
    // What another process wrote there is checked, not trusted.
    const roll = new Redis(redis.url)
    t.teardown(() => { roll.disconnect() })
    const key = `${redis.prefix}queues:members`
    await roll.hset(key, 'forged', JSON.stringify({ id: 'forged', role: 'boss', last_seen: new Date().toISOString() }))
    t.same((await rollOf(api.base)).map((member) => member.id).sort(), members.map((member) => member.id).sort(),
      'an entry of the wrong shape is not listed')
    t.equal(await roll.hexists(key, 'forged'), 0, 'and is struck off')
    t.same((await call(api.base, 'GET', '/readyz')).body, { status: 'ready' }, 'without a token: no roll')
    t.match(await metricsOf(api.base), /agent_runner_fleet_members\{role="worker"\} 3\b/)
    const health = workers[0]!.healthFile
    const first = readFileSync(health, 'utf8')
    t.ok(Date.parse(first.trim()) > 0, 'HEALTH_FILE holds the time of the last renewal')
    await until(() => readFileSync(health, 'utf8'), (now) => now !== first, 5000, 'the worker to renew its HEALTH_FILE')
  })

  t.test('a refusal on the worker is the API replica’s answer; nothing starts', async (t) => {
    const before = ranOnWorkers().length
    const missing = join(tempDir(t), 'not-there')
    t.match(
      await call(
        api.base, 'POST', '/runs', { body: { tool: 'crush_run', task: 'where?', cwd: missing }, headers: ALICE }
      ),
      { status: 400, body: { code: 'CWD_NOT_FOUND' } }
    )
    t.equal(ranOnWorkers().length, before, 'no agent started')
    t.equal(await inUse(api.base, 'crush_run', ALICE), 0, 'its slot given back')
  })

  t.test('the fleet limit holds across workers; DELETE on the API replica stops a worker’s agent', async (t) => {
    const dir = tempDir(t)
    const pidFiles = [join(dir, 'one.pid'), join(dir, 'two.pid')]
    const before = workers.map((worker) => worker.starts().length)
    const held = []
    for (const pidFile of pidFiles) {
      held.push(await createRun(api.base, { tool: 'crush_run', task: scenario.drip(100000, 50, pidFile) }, ALICE))
    }
    const pids = await Promise.all(pidFiles.map((file) => readPidFile(file)))
    t.same(
      workers.map((worker, index) => worker.starts().length - before[index]!).sort(), [0, 1, 1],
      'each on a worker of its own: one run per worker at most'
    )
    t.match(
      await call(api.base, 'POST', '/runs', { body: { tool: 'crush_run', task: 'a third' }, headers: ALICE }),
      { status: 429, body: { code: 'AGENT_LIMIT_REACHED' } }, 'a third is refused at once, as a full tool is'
    )
    t.match(
      await cancelRun(api.base, held[0]!.id, ALICE), { status: 'cancelled', result: { stop_reason: 'cancelled' } },
      'DELETE answers with the end its worker recorded'
    )
    await until(() => isAlive(pids[0]!), (alive) => !alive, 10_000, 'the cancelled agent to be gone')
    t.ok(isAlive(pids[1]!), 'the other run goes on')
    const next = await createRun(api.base, { tool: 'crush_run', task: 'in its slot' }, ALICE)
    t.match(next, { status: 'running' }, 'its slot is free again')
    await cancelRun(api.base, held[1]!.id, ALICE)
    await settled(api.base, next.id, 10_000, ALICE)
  })

  t.test('a burst of 10 on two API replicas, fleet limit 2: 2 run and 8 are refused at once; with queue_timeout all ' +
    '10 run in turn, never more than 2 at once nor 2 on one worker, the waiting counted fleet-wide', async (t) => {
    const dir = tempDir(t)
    const log = join(dir, 'spans.log')
    const tasksOf = (wave: string): string[] =>
      Array.from({ length: 10 }, (_, index) => scenario.span(log, join(dir, `${wave}.open`), `${wave}-${index}`))
    const startedOf = (tasks: string[]): string[] => ranOnWorkers().filter((task) => tasks.includes(task))

    const refusedWave = tasksOf('at-once')
    let answered = 0
    const atOnce = refusedWave.map(async (task, index) => {
      const answer = await call(apis[index % 2]!.base, 'POST', '/tools/crush_run', { body: { task }, headers: ALICE })
      answered++
      return answer
    })
    await until(() => answered, (count) => count === 8, 30_000, 'all but the two running to be answered')
    writeFileSync(join(dir, 'at-once.open'), '')
    const answers = await Promise.all(atOnce)
    t.equal(answers.filter(({ status }) => status === 200).length, 2, 'queue_timeout 0: two ran')
    const refusals = answers.filter(({ status }) => status !== 200)
    t.same(refusals.map(({ status, body }) => [status, (body as { code: string }).code]),
      Array.from({ length: 8 }, () => [429, 'AGENT_LIMIT_REACHED']), 'eight refused at once')
    t.equal(startedOf(refusedWave).length, 2, 'no agent started for the refused')

    const queuedWave = tasksOf('in-turn')
    const synchronous = queuedWave.slice(0, 5).map((task) => call(apis[0]!.base, 'POST', '/tools/crush_run', {
      body: { task, queue_timeout: 120 }, headers: ALICE
    }))
    const streamed = queuedWave.slice(5).map(async (task) => parseNdjson(
      await (await openStream(apis[1]!.base, 'crush_run', { task, queue_timeout: 120 }, { headers: ALICE })).text()
    ))
    for (const { base } of apis) {
      await until(() => queuedOf(base), (count) => count === 8, 30_000, 'eight waiting, as either replica says')
    }
    await until(() => spansIn(log).filter(({ marker }) => marker.startsWith('in-turn-')).length, (count) => count === 2,
      30_000, 'the two given a slot to be running')
    const own = await Promise.all(apis.map(async ({ base }) => ownQueuedOf(base)))
    t.ok(own.every((count) => count > 0 && count < 8) && own[0]! + own[1]! === 8,
      `each replica holds some of them (${own.join(' + ')})`)
    writeFileSync(join(dir, 'in-turn.open'), '')
    for (const answer of await Promise.all(synchronous)) t.match(answer, { status: 200, body: { ok: true } })
    for (const events of await Promise.all(streamed)) {
      t.match(events.at(-1), { type: 'result', result: { ok: true } })
      const places = events.flatMap((event) => (event.type === 'queued' ? [event.position] : []))
      t.ok(places.every((place, index) => index === 0 || place < places[index - 1]!), `places ${places.join(', ')}`)
    }
    t.same([...startedOf(queuedWave)].sort(), [...queuedWave].sort(), 'each started once')
    t.same(apiStarts(), [], 'none on an API replica')
    const spans = spansIn(log).filter(({ marker }) => marker.startsWith('in-turn-'))
    t.equal(mostAtOnce(spans), 2, 'never more than the fleet limit alive at once', { spans })
    for (const [index, worker] of workers.entries()) {
      const ran = new Set(
        queuedWave.filter((task) => worker.starts().includes(task)).map((task) => task.split(' ')[3])
      )
      t.ok(mostAtOnce(spans.filter(({ marker }) => ran.has(marker))) <= 1, `worker ${index}: one at a time`)
    }
    t.equal(await queuedOf(apis[1]!.base), 0, 'nothing waits any more')
  })

  t.test('a run waiting its turn on one API replica, cancelled by DELETE on the other, never starts', async (t) => {
    const dir = tempDir(t)
    const pidFiles = [join(dir, 'first.pid'), join(dir, 'second.pid')]
    const held = []
    for (const pidFile of pidFiles) {
      held.push(await createRun(apis[0]!.base, { tool: 'crush_run', task: scenario.drip(100000, 50, pidFile) }, ALICE))
    }
    await Promise.all(pidFiles.map((file) => readPidFile(file)))
    const task = 'waiting, then cancelled elsewhere'
    const waiting = await createRun(apis[0]!.base, { tool: 'crush_run', task, queue_timeout: 120 }, ALICE)
    t.match(waiting, { status: 'queued', queue_position: 1 })
    t.match(await cancelRun(apis[1]!.base, waiting.id, ALICE), { status: 'cancelled' }, 'DELETE on the other replica')
    await until(() => queuedOf(apis[0]!.base), (count) => count === 0, 10_000, 'its place to be given up')
    for (const { id } of held) await cancelRun(apis[0]!.base, id, ALICE)
    const after = await createRun(apis[0]!.base, { tool: 'crush_run', task: 'after the cancelled one' }, ALICE)
    await settled(apis[0]!.base, after.id, 10_000, ALICE)
    t.match(await settled(apis[1]!.base, waiting.id, 10_000, ALICE), { status: 'cancelled' }, 'still cancelled')
    t.notOk(ranOnWorkers().includes(task), 'its agent never started')
  })

  t.test('no worker takes the tool: the run is taken back and refused, nothing started', async (t) => {
    const before = ranOnWorkers().length
    t.match(
      await call(api.base, 'POST', '/runs', { body: { tool: 'claude_run', task: 'anyone?' }, headers: ALICE }),
      { status: 503, body: { code: 'NO_WORKER' } }
    )
    t.equal(ranOnWorkers().length, before, 'nothing started')
    t.equal(await inUse(api.base, 'claude_run', ALICE), 0, 'its slot given back')
  })

  t.test('a synchronous run on the API replica runs on a worker: listed while it runs, stopped by DELETE there, ' +
    'answered as a local one', async (t) => {
    const tasks = ['sync on the fleet', 'sync at home']
    const [onFleet, atHome] = await Promise.all([
      runTool(api.base, 'crush_run', { task: tasks[0]! }, ALICE),
      runTool(local.base, 'crush_run', { task: tasks[1]! }, ALICE)
    ])
    t.equal(echoed(onFleet).prompt, tasks[0], 'the task reached the worker’s agent whole')
    t.ok(ranOnWorkers().includes(tasks[0]!), 'on a worker')
    t.same(apiStarts(), [], 'never on the API replica')
    t.same(Object.keys(onFleet).sort(), Object.keys(atHome).sort(), 'the same result as a replica running it itself')
    t.match(onFleet, { ok: atHome.ok, exit_code: atHome.exit_code, stop_reason: null })

    const pidFile = join(tempDir(t), 'sync.pid')
    const answer = call(api.base, 'POST', '/tools/crush_run', {
      body: { task: scenario.drip(100000, 50, pidFile) }, headers: ALICE
    })
    const pid = await readPidFile(pidFile)
    const listed = await until(
      async () => (await call(api.base, 'GET', '/runs', { headers: ALICE })).body as { runs: RunSummary[] },
      ({ runs }) => runs.some((run) => run.kind === 'sync'), 5000, 'the run to be listed'
    )
    const syncRuns = listed.runs.filter((run) => run.kind === 'sync')
    t.equal(syncRuns.length, 1, 'listed once, where its caller is')
    t.match(syncRuns[0], { status: 'running', tool: 'crush_run' })
    const { id } = syncRuns[0]!
    t.match(await call(api.base, 'GET', `/runs/${id}/events`, { headers: ALICE }), { status: 404 },
      'its events are its caller’s answer, not to follow: as a local synchronous run’s')
    t.match(await cancelRun(api.base, id, ALICE), { id, status: 'cancelled' }, 'DELETE on the API replica')
    t.match(await answer, { status: 200, body: { ok: false, stop_reason: 'cancelled' } }, 'its caller told so')
    t.notOk(isAlive(pid), 'the agent on its worker is gone')
    t.match(await call(api.base, 'GET', `/runs/${id}`, { headers: ALICE }), { status: 404 },
      'gone once ended, as a local synchronous run is')
  })

  t.test('a streamed run on the API replica: the same events, steps and result as a local one', async (t) => {
    const task = scenario.toolCalls(3, 20)
    const read = async (base: string): Promise<RunEvent[]> => {
      const response = await openStream(base, 'codex_run', { task }, { headers: ALICE })
      t.equal(response.status, 200)
      return parseNdjson(await response.text())
    }
    const [onFleet, atHome] = await Promise.all([read(api.base), read(local.base)])
    // Each CLI's session is its own; how the output was cut into events is the pipes' doing.
    const resultOf = (events: RunEvent[]) => (events.at(-1) as ResultEvent).result
    const session = (events: RunEvent[]) => new RegExp(resultOf(events).session_id!, 'g')
    const text = (events: RunEvent[]) => outputText(events).replace(session(events), 'its-session')
    t.equal(text(onFleet), text(atHome), 'the same output')
    const steps = (events: RunEvent[]): unknown[] =>
      events.flatMap((event) => event.type === 'step' ? [event.step] : [])
    t.ok(steps(onFleet).length >= 3, 'steps')
    t.same(steps(onFleet), steps(atHome), 'the same steps')
    t.same(onFleet.map((event) => event.type).at(-1), 'result', 'the result last')
    t.match(resultOf(onFleet), { ok: true, stop_reason: null, exit_code: 0 })
    const answer = (events: RunEvent[]) => resultOf(events).output.replace(session(events), '')
    t.equal(answer(onFleet), answer(atHome))
  })

  t.test('a streamed run’s client leaving stops the agent on its worker', async (t) => {
    const pidFile = join(tempDir(t), 'left.pid')
    const controller = new AbortController()
    const response = await openStream(
      api.base, 'crush_run', { task: scenario.drip(100000, 50, pidFile) }, { headers: ALICE, signal: controller.signal }
    )
    t.match(await readUntil(response, /tick 2/), /tick 2/, 'its output relayed as it comes')
    const pid = await readPidFile(pidFile)
    controller.abort()
    await until(() => isAlive(pid), (alive) => !alive, 10_000, 'the agent to be stopped on its worker')
    await until(() => inUse(api.base, 'crush_run', ALICE), (count) => count === 0, 10_000, 'its slot to come back')
  })

  t.test('an async run’s webhook: its start and its end once each, as its worker recorded it', async (t) => {
    const hook = await webhookReceiver(t, () => 200)
    // Its agent runs until its start has been delivered: running when the API replica learns it started, however slow.
    const held = heldAgent(t)
    const { id } = await createRun(api.base, {
      tool: 'crush_run', task: held.task, webhook: { url: hook.url, events: ['run.started', 'run.finished'] }
    }, ALICE)
    await until(() => hook.received.length, (count) => count >= 1, 10_000, 'its start')
    held.release()
    t.match(await settled(api.base, id, 10_000, ALICE), { status: 'succeeded' })
    await until(() => hook.received.length, (count) => count >= 2, 10_000, 'its start and its end')
    const bodies = hook.received.map((each) => JSON.parse(each.body) as { type: string; data: { status: string } })
    t.same(bodies.map((body) => [body.type, body.data.status]).sort(),
      [['run.finished', 'succeeded'], ['run.started', 'running']])
  })

  t.test('a worker stopped with SIGTERM stops its run, which reads cancelled', async (t) => {
    const pidFile = join(tempDir(t), 'stopped.pid')
    const before = workers.map((worker) => worker.starts().length)
    const { id } = await createRun(api.base, { tool: 'crush_run', task: scenario.drip(100000, 50, pidFile) }, ALICE)
    const pid = await readPidFile(pidFile)
    const stopped = workers.find((worker, index) => worker.starts().length > before[index]!)!
    const exited = once(stopped.child, 'exit')
    stopped.child.kill('SIGTERM')
    t.same(await exited, [0, null], 'the worker exits 0')
    t.notOk(isAlive(pid), 'its agent is gone')
    t.match(await settled(api.base, id, 10_000, ALICE), { status: 'cancelled', result: { stop_reason: 'shutdown' } })
    workers.splice(workers.indexOf(stopped), 1)
    t.equal((await rollOf(api.base)).filter((member) => member.role === 'worker').length, 2, 'it left the roll at once')
  })

  t.test('a worker SIGKILLed mid-run: its run is lost, its slot comes back, nothing runs it again', async (t) => {
    const pidFile = join(tempDir(t), 'doomed.pid')
    const before = workers.map((worker) => worker.starts().length)
    const { id } = await createRun(api.base, { tool: 'crush_run', task: scenario.drip(100000, 50, pidFile) }, ALICE)
    await readPidFile(pidFile)
    const doomed = workers.find((worker, index) => worker.starts().length > before[index]!)!
    const survivor = workers.find((worker) => worker !== doomed)!
    const survivorRan = survivor.starts().length
    doomed.child.kill('SIGKILL')
    t.match(await settled(api.base, id, 20_000, ALICE), { status: 'lost' }, 'lost')
    await until(() => inUse(api.base, 'crush_run', ALICE), (count) => count === 0, 10_000, 'its slot to come back')
    const next = await createRun(api.base, { tool: 'crush_run', task: 'after the loss', queue_timeout: 30 }, ALICE)
    t.match(await settled(api.base, next.id, 30_000, ALICE), { status: 'succeeded' }, 'the fleet runs on')
    t.same(survivor.starts().slice(survivorRan), ['after the loss'], 'the lost run never started again')
    await until(
      async () => (await rollOf(api.base)).filter((member) => member.role === 'worker').length, (count) => count === 1,
      10_000, 'the killed worker to be struck off the roll'
    )
  })

  t.test('the worker of a synchronous run SIGKILLed: its caller is told 503 RUN_LOST, nothing runs it again',
    async (t) => {
      const pidFile = join(tempDir(t), 'sync-doomed.pid')
      const task = scenario.drip(100000, 50, pidFile)
      const answer = call(api.base, 'POST', '/tools/crush_run', { body: { task }, headers: ALICE })
      await readPidFile(pidFile)
      const doomed = workers.find((worker) => worker.starts().includes(task))!
      doomed.child.kill('SIGKILL')
      t.match(await answer, { status: 503, body: { code: 'RUN_LOST' } })
      await until(() => inUse(api.base, 'crush_run', ALICE), (count) => count === 0, 10_000, 'its slot to come back')
      t.equal(ranOnWorkers().filter((started) => started === task).length, 1, 'started once')
    })

  t.test('the API replica shut down while no worker has taken a run: taken back, refused, never started', async (t) => {
    const waiting = new Redis(redis.url)
    t.teardown(() => { waiting.disconnect() })
    const key = `${redis.prefix}queues:runs.claude_run:wait`
    const answer = call(api.base, 'POST', '/runs', { body: { tool: 'claude_run', task: 'nobody' }, headers: ALICE })
    await until(() => waiting.llen(key), (count) => count === 1, 5000, 'the run to wait for a worker')
    t.match(await metricsOf(api.base), /agent_runner_fleet_waiting\{tool="claude_run"\} 1\b/, 'counted as waiting')
    api.child.kill('SIGTERM')
    t.match(await answer, { status: 503, body: { code: 'SHUTTING_DOWN' } })
    t.equal(await waiting.llen(key), 0, 'no longer offered to workers')
  })
})

t.test('ROLE=api with only workers that take no tool is not ready: no run it admits could run', { skip: NO_REDIS },
  async (t) => {
    const takesNothing = Object.fromEntries(
      BUILT_IN_AGENTS.map((spec) => [`WORKER_MAX_${spec.agent.toUpperCase()}_AGENTS`, '0'])
    )
    const { api } = await fleet(t, 1, takesNothing)
    const answer = await until(
      () => call(api.base, 'GET', '/readyz', { headers: ALICE }),
      ({ body }) => (body as { fleet?: { members: FleetMember[] } }).fleet?.members.some(
        (member) => member.role === 'worker'
      ) === true,
      10_000, 'the worker on the roll'
    )
    t.match(answer, {
      status: 503, body: { status: 'unavailable', fleet: { members: [{ agents: {} }, { agents: {} }] } }
    })
  })

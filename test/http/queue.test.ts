import t, { type Test } from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import {
  build, call, cancelRun, createRun, getRun, heldAgent, listen, ndjson, openStream, post, readPidFile, refused,
  runTool, scenario, settled, standInEnv, tempDir, until, type RunEvent
} from '../helpers/index.js'

// Waiting for a slot (issue 40, item 1), in one process: `queue_timeout` lets a run wait its turn, first come first
// served, instead of a 429; 0 keeps the seed's answer. A run stopped while it waits never starts.

interface Service {
  app: FastifyInstance
  /** The tasks the stand-ins started, in order. */
  started: () => string[]
}

async function service(t: Test, overrides: Record<string, string> = {}): Promise<Service> {
  const log = join(tempDir(t), 'starts.log')
  const app = await build(t, { MAX_CRUSH_AGENTS: '1', ...overrides }, standInEnv({ STAND_IN_LOG: log }))
  const taskOf = (line: string): string => (JSON.parse(line) as { argv: string[] }).argv.at(-1)!
  const started = (): string[] =>
    existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map(taskOf) : []
  return { app, started }
}

const queuedOf = async (app: FastifyInstance): Promise<number> =>
  ((await call(app, 'GET', '/tools')).body as { tools: Array<{ name: string; queued: number }> })
    .tools.find((tool) => tool.name === 'crush_run')!.queued

/** Holds the tool's one slot until released. */
async function holdTheSlot(t: Test, s: Service) {
  const held = heldAgent(t)
  const answer = runTool(s.app, 'crush_run', { task: held.task })
  await readPidFile(held.pidFile)
  return { release: held.release, answer }
}

t.test('queue_timeout 0 (the default) keeps the seed: a full tool answers 429 at once', async (t) => {
  const s = await service(t)
  const held = await holdTheSlot(t, s)
  for (const body of [{ task: 'x' }, { task: 'x', queue_timeout: 0 }]) {
    const answer = await refused(s.app, 'crush_run', body)
    t.same(
      [answer.status, answer.body.code, answer.body.message], [429, 'AGENT_LIMIT_REACHED', 'Limite de 1 agent atteinte']
    )
  }
  held.release()
  await held.answer
})

t.test('runs that wait start in the order they came, each once the one before has ended; the agent’s timeout starts ' +
  'when it starts', async (t) => {
  const s = await service(t)
  const held = await holdTheSlot(t, s)
  const waiting = ['first', 'second', 'third'].map((name) =>
    runTool(s.app, 'crush_run', { task: scenario.sleep(100, name), queue_timeout: 60, timeout: 3 }))
  await until(() => queuedOf(s.app), (queued) => queued === 3, 10_000, 'three runs waiting')
  // Each waits longer than its own timeout before its turn: time is what is waited for here, not a state.
  const queuedAt = Date.now()
  await until(() => Date.now() - queuedAt, (waited) => waited > 3500, 10_000, 'the runs’ timeout to pass in the queue')
  held.release()
  const results = await Promise.all(waiting)
  t.same(results.map((result) => [result.ok, result.timed_out]), [[true, false], [true, false], [true, false]],
    'none timed out: each one’s 3 s began as its agent started, not as it started waiting')
  t.same(s.started().slice(1), ['first', 'second', 'third'].map((name) => scenario.sleep(100, name)), 'in order')
  t.equal(await queuedOf(s.app), 0)
})

t.test('a wait that runs out is 429 QUEUE_TIMED_OUT, and nothing started; past MAX_QUEUED_<AGENT>, QUEUE_FULL at once',
  async (t) => {
    const s = await service(t, { MAX_QUEUED_CRUSH: '1' })
    const held = await holdTheSlot(t, s)
    const waiter = post(s.app, 'crush_run', { task: 'waits', queue_timeout: 1 })
    await until(() => queuedOf(s.app), (queued) => queued === 1, 10_000, 'one run waiting')
    const full = await refused(s.app, 'crush_run', { task: 'one too many', queue_timeout: 60 })
    t.same([full.status, full.body.code], [429, 'QUEUE_FULL'])
    const timedOut = await waiter
    t.same([timedOut.status, (timedOut.body as { code: string }).code], [429, 'QUEUE_TIMED_OUT'])
    t.match((timedOut.body as { message: string }).message, /no slot freed up within 1 s/)
    held.release()
    await held.answer
    t.same(s.started().length, 1, 'only the held agent ever started')
  })

t.test('an async run accepted while it waits: queued with its place, DELETE takes it out, it never starts',
  async (t) => {
    const s = await service(t)
    const held = await holdTheSlot(t, s)
    const first = await createRun(s.app, { tool: 'crush_run', task: 'first in line', queue_timeout: 60 })
    const second = await createRun(s.app, { tool: 'crush_run', task: 'second in line', queue_timeout: 60 })
    t.match(first, { status: 'queued', queue_position: 1, result: null })
    t.match(second, { status: 'queued', queue_position: 2 })
    t.match(await cancelRun(s.app, first.id), { status: 'cancelled', result: null })
    t.match(await getRun(s.app, second.id), { status: 'queued', queue_position: 1 }, 'the next moved up')
    held.release()
    t.match(await settled(s.app, second.id), { status: 'succeeded' })
    t.match(await getRun(s.app, first.id), { status: 'cancelled', result: null, error: { code: String } })
    t.notOk(s.started().includes('first in line'), 'the cancelled run never started')
  })

t.test('an async run whose wait runs out fails, saying why', async (t) => {
  const s = await service(t)
  const held = await holdTheSlot(t, s)
  const run = await createRun(s.app, { tool: 'crush_run', task: 'waits', queue_timeout: 1 })
  t.match(await settled(s.app, run.id), {
    status: 'failed', result: null, error: { code: 'QUEUE_TIMED_OUT', message: /within 1 s/ }
  })
  held.release()
  await held.answer
})

t.test('a stream says its place as it waits, then streams its run; one whose wait runs out ends with an error event',
  async (t) => {
    const s = await service(t)
    const base = await listen(t, s.app)
    const held = await holdTheSlot(t, s)
    const ahead = await createRun(s.app, { tool: 'crush_run', task: 'ahead', queue_timeout: 60 })
    const response = await openStream(base, 'crush_run', { task: 'streamed', queue_timeout: 60 })
    t.equal(response.status, 200, 'the stream opens as the run starts waiting')
    const events: RunEvent[] = []
    const reading = (async () => { for await (const event of ndjson(response.body!)) events.push(event) })()
    await until(() => events.length, (count) => count >= 1, 10_000, 'its first event')
    t.same(events[0], { type: 'queued', position: 2 })
    held.release()
    await reading
    t.same(events.filter((event) => event.type === 'queued'), [
      { type: 'queued', position: 2 }, { type: 'queued', position: 1 }
    ], 'its place, strictly decreasing')
    t.match(events.at(-1), { type: 'result', result: { ok: true } })
    await settled(s.app, ahead.id)

    const again = await holdTheSlot(t, s)
    const late = await openStream(base, 'crush_run', { task: 'late', queue_timeout: 1 })
    const lateEvents: RunEvent[] = []
    for await (const event of ndjson(late.body!)) lateEvents.push(event)
    t.match(lateEvents, [
      { type: 'queued', position: 1 },
      { type: 'error', error: { statusCode: 429, code: 'QUEUE_TIMED_OUT' } }
    ])
    again.release()
    await again.answer
  })

t.test('a client that leaves while its run waits takes it out of the queue: it never starts', async (t) => {
  const s = await service(t)
  const base = await listen(t, s.app)
  const held = await holdTheSlot(t, s)
  const leaving = new AbortController()
  const gone = fetch(`${base}/tools/crush_run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ task: 'gone before its turn', queue_timeout: 60 }),
    signal: leaving.signal
  }).catch(() => undefined)
  await until(() => queuedOf(s.app), (queued) => queued === 1, 10_000, 'the run waiting')
  leaving.abort()
  await gone
  await until(() => queuedOf(s.app), (queued) => queued === 0, 10_000, 'the queue empty again')
  held.release()
  await held.answer
  t.notOk(s.started().includes('gone before its turn'))
})

import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import {
  build,
  heldAgent,
  call,
  cancelRun,
  createRun,
  getRun,
  isAlive,
  linesIn,
  listen,
  listRuns,
  outputs,
  parseSse,
  readPidFile,
  releaseStep,
  scenario,
  settled,
  tempDir,
  until,
  type SseFrame
} from '../helpers/index.js'

// Async runs (src/http/routes/runs.ts, src/runs/registry.ts): created, read, followed, listed, cancelled, retained.

/** The SSE frames of a run's events, as a follower reads them (whole: the stream closes after the result). */
const followed = async (base: string, id: string, lastEventId?: string, query = ''): Promise<SseFrame[]> =>
  parseSse(
    await (await fetch(`${base}/runs/${id}/events${query}`, {
      headers: lastEventId === undefined ? {} : { 'last-event-id': lastEventId }
    })).text()
  )

const slotsBack = (app: FastifyInstance, tool: string) =>
  until(() => app.slots.inUse(tool), (inUse) => inUse === 0, 5000, `${tool}'s slots to come back`)

// Each test has its own service: they run side by side, most of their time spent waiting on their runs.
t.jobs = 4

t.test('POST /runs answers 202 with an id and a Location; the run ends on its own and is fetched later', async (t) => {
  const app = await build(t)
  const held = heldAgent(t)
  const response = await call(app, 'POST', '/runs', { body: { tool: 'claude_run', task: held.task } })
  t.equal(response.status, 202)
  const created = response.body
  t.match(created, {
    id: /^[0-9a-f-]{36}$/, tool: 'claude_run', status: 'running', created_at: String, finished_at: null, result: null
  })
  t.equal(response.headers['location'], `/runs/${created.id}`)
  t.equal(app.slots.inUse('claude_run'), 1, 'it holds a slot like a synchronous run')

  // It outlives its caller: nobody holds a connection to it while it runs.
  held.release()
  const done = await settled(app, created.id)
  t.match(done, {
    id: created.id,
    status: 'succeeded',
    finished_at: String,
    result: { tool: 'claude_run', ok: true, output: 'released', agent_report: { is_error: false } }
  })
  t.equal(await slotsBack(app, 'claude_run'), 0)
})

t.test('the statuses: failed, timed_out', async (t) => {
  const app = await build(t, { AGENT_KILL_GRACE_MS: '100' })
  const failed = await createRun(app, { tool: 'crush_run', task: scenario.fail() })
  t.match(await settled(app, failed.id), { status: 'failed', result: { exit_code: 1 } })
  const slow = await createRun(app, { tool: 'crush_run', task: scenario.sleep(5000), timeout: 1 })
  t.match(await settled(app, slow.id), { status: 'timed_out', result: { timed_out: true } })
})

t.test('the same refusals as the tool routes, and 404 for an unknown run', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '1', CLAUDE_BIN: 'no-claude-here' })
  const create = async (body: object) => (await call(app, 'POST', '/runs', { body })).body
  t.match(await create({ task: 'x' }), { statusCode: 400, code: 'VALIDATION_ERROR', message: /tool is required/ })
  t.match(await create({ tool: 'nope_run', task: 'x' }), { statusCode: 400, code: 'VALIDATION_ERROR' })
  t.match(await create({ tool: 'crush_run', task: 'x', extra: 1 }), {
    statusCode: 400, message: /body\/extra is not an accepted field/
  })
  t.match(await create({ tool: 'crush_run', task: 'x', cwd: '/does/not/exist' }), {
    statusCode: 400, code: 'CWD_NOT_FOUND'
  })
  t.match(await create({ tool: 'claude_run', task: 'x' }), { statusCode: 503, code: 'AGENT_NOT_INSTALLED' })
  t.equal(app.slots.inUse('claude_run'), 0, 'the failed spawn gave its slot back')

  const held = heldAgent(t)
  const holder = await createRun(app, { tool: 'crush_run', task: held.task })
  const refused = await call(app, 'POST', '/runs', { body: { tool: 'crush_run', task: 'x' } })
  t.equal(refused.status, 429)
  t.match(refused.body, { code: 'AGENT_LIMIT_REACHED', message: 'Limite de 1 agent atteinte' })
  const sync = await app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: 'x' } })
  t.equal(sync.statusCode, 429, 'async and synchronous runs share the slots')
  held.release()
  t.match(await settled(app, holder.id), { status: 'succeeded' })

  for (const [method, url] of [
    ['GET', '/runs/nope'], ['GET', '/runs/nope/events'], ['DELETE', '/runs/nope']
  ] as const) {
    const response = await call(app, method, url)
    t.equal(response.status, 404)
    t.match(response.body, { code: 'RUN_NOT_FOUND' })
  }
})

t.test('events: the output from the beginning, then the result, then the stream closes; ' +
  'Last-Event-ID resumes exactly', async (t) => {
  const app = await build(t, { STREAM_HEARTBEAT_MS: '50' })
  const base = await listen(t, app)
  // Each line is written once the follower has seen the one before and then a heartbeat: the agent is quiet while it
  // waits, however late the follower attached (a run that sent none ends at its deadline instead).
  const gates = tempDir(t)
  const task = scenario.gated(gates, 'out:tick-1', 'out:tick-2', 'out:tick-3')
  const created = await createRun(app, { tool: 'crush_run', task, timeout: 30 })

  // Its output alone: crush's lines are steps too (test/http/steps.test.ts follows them).
  const live = await fetch(`${base}/runs/${created.id}/events?events=output`)
  t.match(live.headers.get('content-type'), /^text\/event-stream/)
  const decoder = new TextDecoder()
  let text = ''
  for await (const chunk of live.body!) {
    text += decoder.decode(chunk, { stream: true })
    const seen = parseSse(text.slice(0, text.lastIndexOf('\n\n') + 2))
    const quiet = seen.slice(seen.findLastIndex((frame) => frame.event === 'output') + 1)
    if (quiet.some((frame) => frame.event === 'heartbeat')) releaseStep(gates, linesIn(seen.map(({ data }) => data)))
  }
  const frames = parseSse(text)
  t.ok(frames.some((frame) => frame.event === 'heartbeat'), 'heartbeats while the agent is quiet')
  const stored = frames.filter((frame) => frame.event !== 'heartbeat')
  t.ok(
    stored.slice(0, -1).every((frame) => frame.event === 'output'), 'output events (however the writes were chunked)…'
  )
  t.equal(stored.at(-1)!.event, 'result', '…then the result')
  const outputEvents = outputs(stored.map((frame) => frame.data))
  t.equal(outputEvents.map((event) => event.data).join(''), 'tick-1\ntick-2\ntick-3\ngated\n')
  const outputEnds = outputEvents.map((event) => event.offset + Buffer.byteLength(event.data))
  t.same(
    stored.map((frame) => Number(frame.id)), [...outputEnds, outputEnds.at(-1)! + 1],
    'an output event’s id is where its bytes end; the result’s comes after'
  )
  t.match(stored.at(-1)!.data, { type: 'result', result: { ok: true, tool: 'crush_run' } })

  // After the run: everything again from the start, or exactly what follows a given event.
  const replay = (await followed(
    base, created.id, undefined, '?events=output'
  )).filter((frame) => frame.event !== 'heartbeat')
  t.same(replay, stored, 'a late follower gets the whole run')
  const resumed = (await followed(
    base, created.id, stored[1]!.id, '?events=output'
  )).filter((frame) => frame.event !== 'heartbeat')
  t.same(resumed, stored.slice(2), 'Last-Event-ID: exactly the missing events')
})

t.test('DELETE stops the whole tree, during the kill grace period too, and answers the final state', async (t) => {
  const pidFile = join(tempDir(t), 'g.pid')
  const app = await build(t, { AGENT_KILL_GRACE_MS: '2000', MAX_CRUSH_AGENTS: '1' })
  const created = await createRun(app, { tool: 'crush_run', task: scenario.grandchild(pidFile, { stubborn: true }) })
  const grandchild = await readPidFile(pidFile)
  // Two cancels: the second arrives while the first is still waiting out the grace periods, which begin with the
  // SIGINT the agent records (and ignores).
  const first = cancelRun(app, created.id)
  const signals = `${pidFile}.signals`
  await until(
    () => (existsSync(signals) ? readFileSync(signals, 'utf8') : ''), (seen) => seen.includes('SIGINT'), 5000,
    'the agent to get SIGINT'
  )
  t.equal((await getRun(app, created.id)).status, 'running', 'still stopping: the agent ignores SIGINT')
  const second = cancelRun(app, created.id)
  for (const answer of await Promise.all([first, second])) {
    t.match(answer, { status: 'cancelled', result: { stop_reason: 'cancelled', signal: 'SIGKILL', ok: false } })
  }
  t.equal(
    readFileSync(signals, 'utf8'), 'SIGINT\nSIGTERM\n',
    'SIGINT, then SIGTERM a grace later; SIGKILL, another grace later, ended it'
  )
  t.notOk(
    await until(() => isAlive(grandchild), (alive) => !alive, 10_000, 'the grandchild to die'),
    'the grandchild ignoring every signal is gone'
  )
  t.equal(app.slots.inUse('crush_run'), 0)
  t.match(await cancelRun(app, created.id), { status: 'cancelled' }, 'a finished run is answered as it is')
})

t.test('GET /runs lists runs newest first', async (t) => {
  const app = await build(t)
  const ids: string[] = []
  for (const task of ['a', 'b', 'c']) {
    const created = await createRun(app, { tool: 'crush_run', task })
    ids.push(created.id)
    await settled(app, created.id)
  }
  const listed = await listRuns(app)
  t.same(listed.map((run) => run.id), [...ids].reverse())
  t.match(listed[0], { tool: 'crush_run', status: 'succeeded', created_at: String, finished_at: String })
})

t.test('retention: the oldest finished runs go first, by count and by age', async (t) => {
  const byCount = await build(t, { RUNS_MAX_FINISHED: '2' })
  const ids: string[] = []
  for (const task of ['1', '2', '3']) {
    const created = await createRun(byCount, { tool: 'crush_run', task })
    ids.push(created.id)
    await settled(byCount, created.id)
  }
  t.equal((await call(byCount, 'GET', `/runs/${ids[0]}`)).status, 404, 'the oldest is gone')
  t.equal((await call(byCount, 'GET', `/runs/${ids[1]}`)).status, 200)
  t.equal((await call(byCount, 'GET', `/runs/${ids[2]}`)).status, 200)

  // Long enough that polling (on a loaded machine) sees the run finished before it expires.
  const byAge = await build(t, { RUNS_RETENTION_MS: '2000' })
  const old = await createRun(byAge, { tool: 'crush_run', task: 'x' })
  t.match(await settled(byAge, old.id), { status: 'succeeded' }, 'kept once finished…')
  const expired = await until(
    async () => (await call(byAge, 'GET', `/runs/${old.id}`)).status, (status) => status !== 200, 10_000,
    'the run to expire'
  )
  t.equal(expired, 404, '…until RUNS_RETENTION_MS after it finished')
})

t.test('the output cap applies per run: a flood keeps head and tail, with a gap event between', async (t) => {
  const limit = 256 * 1024
  const app = await build(t, { AGENT_OUTPUT_LIMIT_BYTES: String(limit) })
  const base = await listen(t, app)
  const written = 8 * 1024 * 1024
  const total = written + Buffer.byteLength('flooded\n')
  const created = await createRun(app, { tool: 'crush_run', task: scenario.flood(written) })
  await settled(app, created.id)
  const frames = await followed(base, created.id)
  const gapAt = frames.findIndex((frame) => frame.event === 'gap')
  t.ok(gapAt > 0, 'a gap between the head and the tail')
  const sizes = (from: number, to?: number) =>
    outputs(frames.slice(from, to).map((frame) => frame.data)).map((event) => Buffer.byteLength(event.data))
  const sum = (values: number[]) => values.reduce((total, value) => total + value, 0)
  const head = sizes(0, gapAt)
  const tail = sizes(gapAt + 1)
  // What src/runs/event-log.ts guarantees for a limit L: the head takes events until it holds L/2 (so it overshoots
  // by less than its last event), and the tail drops its oldest events while it holds more than L/2 (keeping one at
  // least). Each event is one read of the pipe, at most 64 KiB.
  t.ok(
    sum(head) >= limit / 2 && sum(head) - head.at(-1)! < limit / 2,
    `head: ${sum(head)} bytes, filled to L/2 by its last event`
  )
  t.ok(tail.length === 1 || sum(tail) <= limit / 2, `tail: ${sum(tail)} bytes in ${tail.length} events, within L/2`)
  t.ok(Math.max(...head, ...tail) <= 64 * 1024, 'no event larger than one read of the pipe')
  t.ok(
    sum(head) + sum(tail) < limit + 64 * 1024,
    `${sum(head) + sum(tail)} bytes kept for replay, less than the limit plus one event`
  )
  t.match(
    frames[gapAt]!.data, { type: 'gap', omitted_bytes: total - sum(head) - sum(tail) },
    'the gap says exactly how much was left out'
  )
  t.match(frames.at(-1), { event: 'result', data: { result: { output_bytes: total } } })
})

t.test('a run belongs to the token that created it: other tokens get 404 and an empty list', async (t) => {
  const app = await build(t, { API_TOKENS: 'alice:secret-a,bob:secret-b' })
  const as = (token: string) => ({ authorization: `Bearer ${token}` })
  const created = await createRun(app, { tool: 'crush_run', task: scenario.sleep(60000) }, as('secret-a'))
  for (const [method, url] of [
    ['GET', `/runs/${created.id}`], ['GET', `/runs/${created.id}/events`], ['DELETE', `/runs/${created.id}`]
  ] as const) {
    const response = await call(app, method, url, { headers: as('secret-b') })
    t.match(
      { status: response.status, code: response.body.code }, { status: 404, code: 'RUN_NOT_FOUND' },
      `bob: ${method} ${url}`
    )
  }
  t.same(await listRuns(app, as('secret-b')), [])
  t.equal(app.slots.inUse('crush_run'), 1, "bob's DELETE did not stop alice's run")
  t.match(await listRuns(app, as('secret-a')), [{ id: created.id, kind: 'async', status: 'running' }])
  t.match(await cancelRun(app, created.id, as('secret-a')), { status: 'cancelled' })
})

t.test('a listed run says who started it, its task’s beginning and its deadline, whatever its kind', async (t) => {
  const app = await build(t, { API_TOKENS: 'alice:secret-a' })
  const as = { authorization: 'Bearer secret-a' }
  // Over 200 characters: a listing shows the beginning, not a copy of what may be a 30,000-character task.
  const task = scenario.sleep(60000, 'x'.repeat(250))
  const before = Date.now()
  const created = await createRun(app, { tool: 'crush_run', task, timeout: 120 }, as)
  const sync = app.inject({ method: 'POST', url: '/tools/claude_run', headers: as, payload: { task, timeout: 300 } })
  const runs = await until(() => listRuns(app, as), (listed) => listed.length === 2, 5000, 'both runs to be listed')
  const after = Date.now()
  for (const [run, timeout] of [
    [runs.find((run) => run.kind === 'async')!, 120], [runs.find((run) => run.kind === 'sync')!, 300]
  ] as const) {
    t.equal(run.caller, 'alice', `${run.kind}: the token's name`)
    t.equal(run.task, `${task.slice(0, 200)}…`, `${run.kind}: the first 200 characters`)
    const deadline = Date.parse(run.deadline!)
    t.ok(
      deadline >= before + timeout * 1000 && deadline <= after + timeout * 1000,
      `${run.kind}: its start plus its timeout`
    )
  }
  t.match(
    await getRun(app, created.id, as), { caller: 'alice', task: `${task.slice(0, 200)}…`, deadline: String },
    'GET /runs/{id} too'
  )
  for (const run of runs) await cancelRun(app, run.id, as)
  await sync
})

t.test('synchronous and streamed runs are listed while they run, and DELETE stops them', async (t) => {
  const app = await build(t)
  const sync = app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: scenario.sleep(60000) } })
  const stream = app.inject({
    method: 'POST',
    url: '/tools/claude_run',
    headers: { accept: 'application/x-ndjson' },
    payload: { task: scenario.sleep(60000) }
  })
  const runs = await until(() => listRuns(app), (listed) => listed.length === 2, 5000, 'both runs to be listed')
  t.same(runs.map(({ kind, tool, status }) => ({ kind, tool, status })).sort((a, b) => a.kind.localeCompare(b.kind)), [
    { kind: 'stream', tool: 'claude_run', status: 'running' },
    { kind: 'sync', tool: 'crush_run', status: 'running' }
  ])
  for (const run of runs) t.match(await cancelRun(app, run.id), { id: run.id, status: 'cancelled', result: null })
  t.match(
    (await sync).json(), { stop_reason: 'cancelled', ok: false }, 'the synchronous caller gets its result, cancelled'
  )
  t.match((await stream).body, /"stop_reason":"cancelled"/)
  t.same(await listRuns(app), [], 'forgotten once their responses are written')
  t.equal(
    (await call(app, 'GET', `/runs/${runs[0]!.id}/events`)).status, 404, 'their output went to their own response'
  )
})

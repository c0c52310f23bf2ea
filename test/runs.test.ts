import t from 'tap'
import { once } from 'node:events'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { build, isAlive, listen, readPidFile, startServer, tempDir, waitFor } from './helper.js'

interface SseFrame {
  id?: string
  event: string
  data: any
}

/** Reads a whole SSE response into frames. */
async function sseFrames(response: Response): Promise<SseFrame[]> {
  const text = await response.text()
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const fields = Object.fromEntries(block.split('\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]))
      return { id: fields['id'], event: fields['event']!, data: JSON.parse(fields['data']!) }
    })
}

const create = (app: FastifyInstance, body: object) => app.inject({ method: 'POST', url: '/runs', payload: body })
const state = async (app: FastifyInstance, id: string) => (await app.inject({ method: 'GET', url: `/runs/${id}` })).json()
const finished = async (app: FastifyInstance, id: string) => {
  await waitFor(() => app.slots.inUse('crush_run') + app.slots.inUse('claude_run') === 0, 10_000, 'runs to end')
  let current = await state(app, id)
  for (let attempt = 0; current.status === 'running' && attempt < 200; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 25))
    current = await state(app, id)
  }
  return current
}

t.test('POST /runs answers 202 with an id and a Location; the run ends on its own and is fetched later', async (t) => {
  const app = await build(t)
  const response = await create(app, { tool: 'claude_run', task: '@sleep 300' })
  t.equal(response.statusCode, 202)
  const created = response.json()
  t.match(created, { id: /^[0-9a-f-]{36}$/, tool: 'claude_run', status: 'running', created_at: String, finished_at: null, result: null })
  t.equal(response.headers['location'], `/runs/${created.id}`)
  t.equal(app.slots.inUse('claude_run'), 1, 'it holds a slot like a synchronous run')

  // It outlives its caller: nobody holds a connection to it while it runs.
  const done = await finished(app, created.id)
  t.match(done, { id: created.id, status: 'succeeded', finished_at: String, result: { tool: 'claude_run', ok: true, output: 'slept 300', agent_report: { is_error: false } } })
  t.equal(app.slots.inUse('claude_run'), 0)
})

t.test('the statuses: failed, timed_out', async (t) => {
  const app = await build(t, { AGENT_KILL_GRACE_MS: '100' })
  const failed = (await create(app, { tool: 'crush_run', task: '@fail' })).json()
  t.match(await finished(app, failed.id), { status: 'failed', result: { exit_code: 1 } })
  const slow = (await create(app, { tool: 'crush_run', task: '@sleep 5000', timeout: 1 })).json()
  t.match(await finished(app, slow.id), { status: 'timed_out', result: { timed_out: true } })
})

t.test('the same refusals as the tool routes, and 404 for an unknown run', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '1', CLAUDE_BIN: 'no-claude-here' })
  t.match((await create(app, { task: 'x' })).json(), { statusCode: 400, code: 'VALIDATION_ERROR', message: /tool is required/ })
  t.match((await create(app, { tool: 'nope_run', task: 'x' })).json(), { statusCode: 400, code: 'VALIDATION_ERROR' })
  t.match((await create(app, { tool: 'crush_run', task: 'x', extra: 1 })).json(), { statusCode: 400, message: /body\/extra is not an accepted field/ })
  t.match((await create(app, { tool: 'crush_run', task: 'x', cwd: '/does/not/exist' })).json(), { statusCode: 400, code: 'CWD_NOT_FOUND' })
  t.match((await create(app, { tool: 'claude_run', task: 'x' })).json(), { statusCode: 503, code: 'AGENT_NOT_INSTALLED' })
  t.equal(app.slots.inUse('claude_run'), 0, 'the failed spawn gave its slot back')

  const holder = (await create(app, { tool: 'crush_run', task: '@sleep 500' })).json()
  const refused = await create(app, { tool: 'crush_run', task: 'x' })
  t.equal(refused.statusCode, 429)
  t.match(refused.json(), { code: 'AGENT_LIMIT_REACHED', message: 'Limite de 1 agent atteinte' })
  const sync = await app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: 'x' } })
  t.equal(sync.statusCode, 429, 'async and synchronous runs share the slots')
  await finished(app, holder.id)

  for (const [method, url] of [['GET', '/runs/nope'], ['GET', '/runs/nope/events'], ['DELETE', '/runs/nope']] as const) {
    const response = await app.inject({ method, url })
    t.equal(response.statusCode, 404)
    t.match(response.json(), { code: 'RUN_NOT_FOUND' })
  }
})

t.test('events: the output from the beginning, then the result, then the stream closes; Last-Event-ID resumes exactly', async (t) => {
  const app = await build(t, { STREAM_HEARTBEAT_MS: '100' })
  const base = await listen(t, app)
  const created = (await create(app, { tool: 'crush_run', task: '@drip 4 200' })).json()
  const follow = (lastEventId?: string) =>
    fetch(`${base}/runs/${created.id}/events`, { headers: lastEventId === undefined ? {} : { 'last-event-id': lastEventId } })

  const live = await follow()
  t.match(live.headers.get('content-type'), /^text\/event-stream/)
  const frames = await sseFrames(live)
  t.ok(frames.some((frame) => frame.event === 'heartbeat'), 'heartbeats while the agent is quiet')
  const stored = frames.filter((frame) => frame.event !== 'heartbeat')
  t.ok(stored.slice(0, -1).every((frame) => frame.event === 'output'), 'output events (however the writes were chunked)…')
  t.equal(stored.at(-1)!.event, 'result', '…then the result')
  t.equal(stored.filter((frame) => frame.event === 'output').map((frame) => frame.data.data).join(''), 'tick 1\ntick 2\ntick 3\ntick 4\ndripped\n')
  const outputEnds = stored.slice(0, -1).map((frame) => frame.data.offset + Buffer.byteLength(frame.data.data))
  t.same(stored.map((frame) => Number(frame.id)), [...outputEnds, outputEnds.at(-1)! + 1], 'an output event’s id is where its bytes end; the result’s comes after')
  t.match(stored.at(-1)!.data, { type: 'result', result: { ok: true, tool: 'crush_run' } })

  // After the run: everything again from the start, or exactly what follows a given event.
  const replay = (await sseFrames(await follow())).filter((frame) => frame.event !== 'heartbeat')
  t.same(replay, stored, 'a late follower gets the whole run')
  const resumed = (await sseFrames(await follow(stored[1]!.id))).filter((frame) => frame.event !== 'heartbeat')
  t.same(resumed, stored.slice(2), 'Last-Event-ID: exactly the missing events')
})

t.test('DELETE stops the whole tree, during the kill grace period too, and answers the final state', async (t) => {
  const dir = tempDir(t)
  const app = await build(t, { AGENT_KILL_GRACE_MS: '400', MAX_CRUSH_AGENTS: '1' })
  const created = (await create(app, { tool: 'crush_run', task: `@grandchild ${join(dir, 'g.pid')} stubborn` })).json()
  const grandchild = await readPidFile(join(dir, 'g.pid'))
  // Two cancels: the second arrives while the first is still waiting out the grace periods.
  const first = app.inject({ method: 'DELETE', url: `/runs/${created.id}` })
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.equal((await state(app, created.id)).status, 'running', 'still stopping: the agent ignores SIGINT')
  const second = app.inject({ method: 'DELETE', url: `/runs/${created.id}` })
  for (const answer of await Promise.all([first, second])) {
    t.equal(answer.statusCode, 200)
    t.match(answer.json(), { status: 'cancelled', result: { stop_reason: 'cancelled', signal: 'SIGKILL', ok: false } })
  }
  await waitFor(() => !isAlive(grandchild), 2000, 'the grandchild to die')
  t.equal(app.slots.inUse('crush_run'), 0)
  const again = await app.inject({ method: 'DELETE', url: `/runs/${created.id}` })
  t.match(again.json(), { status: 'cancelled' }, 'a finished run is answered as it is')
})

t.test('GET /runs lists runs newest first', async (t) => {
  const app = await build(t)
  const ids: string[] = []
  for (const task of ['a', 'b', 'c']) {
    ids.push((await create(app, { tool: 'crush_run', task })).json().id)
    await finished(app, ids.at(-1)!)
  }
  const listed = (await app.inject({ method: 'GET', url: '/runs' })).json().runs
  t.same(listed.map((run: { id: string }) => run.id), [...ids].reverse())
  t.match(listed[0], { tool: 'crush_run', status: 'succeeded', created_at: String, finished_at: String })
})

t.test('retention: the oldest finished runs go first, by count and by age', async (t) => {
  const byCount = await build(t, { RUNS_MAX_FINISHED: '2' })
  const ids: string[] = []
  for (const task of ['1', '2', '3']) {
    ids.push((await create(byCount, { tool: 'crush_run', task })).json().id)
    await finished(byCount, ids.at(-1)!)
  }
  t.equal((await byCount.inject({ method: 'GET', url: `/runs/${ids[0]}` })).statusCode, 404, 'the oldest is gone')
  t.equal((await byCount.inject({ method: 'GET', url: `/runs/${ids[2]}` })).statusCode, 200)

  const byAge = await build(t, { RUNS_RETENTION_MS: '200' })
  const old = (await create(byAge, { tool: 'crush_run', task: 'x' })).json().id
  await finished(byAge, old)
  await new Promise((resolve) => setTimeout(resolve, 400))
  t.equal((await byAge.inject({ method: 'GET', url: `/runs/${old}` })).statusCode, 404, 'expired')
})

t.test('the output cap applies per run: a flood keeps head and tail, with a gap event between', async (t) => {
  const app = await build(t, { AGENT_OUTPUT_LIMIT_BYTES: '65536' })
  const base = await listen(t, app)
  const created = (await create(app, { tool: 'crush_run', task: `@flood ${8 * 1024 * 1024}` })).json()
  await finished(app, created.id)
  const frames = await sseFrames(await fetch(`${base}/runs/${created.id}/events`))
  const kept = frames.filter((frame) => frame.event === 'output').reduce((sum, frame) => sum + Buffer.byteLength(frame.data.data), 0)
  t.ok(kept <= 65536 + 2 * 65536, `${kept} bytes kept for replay`)
  const gap = frames.find((frame) => frame.event === 'gap')
  t.ok(gap !== undefined && gap.data.omitted_bytes > 7 * 1024 * 1024, 'the gap says how much was left out')
  t.match(frames.at(-1), { event: 'result', data: { result: { output_bytes: 8 * 1024 * 1024 + 8 } } })
})

t.test('SIGTERM stops async runs too, and the server still exits 0', async (t) => {
  const pidFile = join(tempDir(t), 'agent.pid')
  const { child, base } = await startServer(t, { AGENT_KILL_GRACE_MS: '300' })
  const created = await fetch(`${base}/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tool: 'crush_run', task: `@write-pid ${pidFile} 60000` })
  })
  t.equal(created.status, 202)
  const agent = await readPidFile(pidFile)
  const exited = once(child, 'exit')
  child.kill('SIGTERM')
  t.same((await exited)[0], 0)
  t.notOk(isAlive(agent), 'the async run’s agent is gone')
})

t.test('a run belongs to the token that created it: other tokens get 404 and an empty list', async (t) => {
  const app = await build(t, { API_TOKENS: 'alice:secret-a,bob:secret-b' })
  const as = (token: string) => ({ authorization: `Bearer ${token}` })
  const created = (await app.inject({ method: 'POST', url: '/runs', headers: as('secret-a'), payload: { tool: 'crush_run', task: '@sleep 60000' } })).json()
  for (const [method, url] of [['GET', `/runs/${created.id}`], ['GET', `/runs/${created.id}/events`], ['DELETE', `/runs/${created.id}`]] as const) {
    const response = await app.inject({ method, url, headers: as('secret-b') })
    t.match({ status: response.statusCode, code: response.json().code }, { status: 404, code: 'RUN_NOT_FOUND' }, `bob: ${method} ${url}`)
  }
  t.same((await app.inject({ method: 'GET', url: '/runs', headers: as('secret-b') })).json(), { runs: [] })
  t.equal(app.slots.inUse('crush_run'), 1, "bob's DELETE did not stop alice's run")
  t.match((await app.inject({ method: 'GET', url: '/runs', headers: as('secret-a') })).json(), { runs: [{ id: created.id, kind: 'async', status: 'running' }] })
  t.match((await app.inject({ method: 'DELETE', url: `/runs/${created.id}`, headers: as('secret-a') })).json(), { status: 'cancelled' })
})

t.test('synchronous and streamed runs are listed while they run, and DELETE stops them', async (t) => {
  const app = await build(t)
  const sync = app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: '@sleep 60000' } })
  const stream = app.inject({ method: 'POST', url: '/tools/claude_run', headers: { accept: 'application/x-ndjson' }, payload: { task: '@sleep 60000' } })
  const listed = async () => (await app.inject({ method: 'GET', url: '/runs' })).json().runs as Array<{ id: string; kind: string; tool: string; status: string }>
  let runs = await listed()
  for (let attempt = 0; runs.length < 2 && attempt < 250; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 20))
    runs = await listed()
  }
  t.same(runs.map(({ kind, tool, status }) => ({ kind, tool, status })).sort((a, b) => a.kind.localeCompare(b.kind)), [
    { kind: 'stream', tool: 'claude_run', status: 'running' },
    { kind: 'sync', tool: 'crush_run', status: 'running' }
  ])
  for (const run of runs) {
    const cancelled = (await app.inject({ method: 'DELETE', url: `/runs/${run.id}` })).json()
    t.match(cancelled, { id: run.id, status: 'cancelled', result: null })
  }
  t.match((await sync).json(), { stop_reason: 'cancelled', ok: false }, 'the synchronous caller gets its result, cancelled')
  t.match((await stream).body, /"stop_reason":"cancelled"/)
  t.same(await listed(), [], 'forgotten once their responses are written')
  const events = await app.inject({ method: 'GET', url: `/runs/${runs[0]!.id}/events` })
  t.equal(events.statusCode, 404, 'their output went to their own response')
})

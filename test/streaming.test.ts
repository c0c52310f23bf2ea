import t from 'tap'
import { join } from 'node:path'
import type { RunEvent } from '../src/schemas/events.js'
import { build, isAlive, listen, readPidFile, tempDir, waitFor } from './helper.js'

/** Reads a streamed response event by event, as a client would. */
async function* ndjsonEvents(response: Response): AsyncGenerator<RunEvent> {
  const decoder = new TextDecoder()
  let pending = ''
  for await (const chunk of response.body!) {
    pending += decoder.decode(chunk, { stream: true })
    const lines = pending.split('\n')
    pending = lines.pop()!
    for (const line of lines) if (line !== '') yield JSON.parse(line)
  }
}

const start = (base: string, tool: string, body: unknown, accept = 'application/x-ndjson', signal?: AbortSignal) =>
  fetch(`${base}/tools/${tool}`, { method: 'POST', headers: { 'content-type': 'application/json', accept }, body: JSON.stringify(body), signal })

t.test('chunks arrive while the agent still runs, then the same result as the synchronous route', async (t) => {
  const app = await build(t)
  const base = await listen(t, app)
  const response = await start(base, 'crush_run', { task: '@drip 3 700' })
  t.equal(response.status, 200)
  t.match(response.headers.get('content-type'), /^application\/x-ndjson/)
  t.equal(response.headers.get('cache-control'), 'no-cache, no-transform')
  t.equal(response.headers.get('x-accel-buffering'), 'no')
  t.match(response.headers.get('x-request-id'), /^[0-9a-f-]{36}$/)

  const events: RunEvent[] = []
  for await (const event of ndjsonEvents(response)) {
    if (event.type === 'output' && events.length === 0) t.equal(app.slots.inUse('crush_run'), 1, 'the first chunk came while the agent was running')
    events.push(event)
  }
  const outputs = events.filter((event) => event.type === 'output')
  t.same(outputs.slice(0, 2).map((event) => event.data), ['tick 1\n', 'tick 2\n'], 'each write as it came')
  t.equal(outputs.map((event) => event.data).join(''), 'tick 1\ntick 2\ntick 3\ndripped\n')
  let offset = 0
  for (const event of outputs) {
    t.equal(event.offset, offset, 'the byte offset of each chunk')
    offset += Buffer.byteLength(event.data)
  }
  const last = events.at(-1)!
  t.equal(last.type, 'result')
  t.match(last, { result: { tool: 'crush_run', ok: true, exit_code: 0, output: 'tick 1\ntick 2\ntick 3\ndripped\n', output_bytes: 29 } })
})

t.test('a heartbeat while the agent is quiet', async (t) => {
  const app = await build(t, { STREAM_HEARTBEAT_MS: '100' })
  const base = await listen(t, app)
  const events: RunEvent[] = []
  for await (const event of ndjsonEvents(await start(base, 'claude_run', { task: '@sleep 700' }))) events.push(event)
  t.ok(events.filter((event) => event.type === 'heartbeat').length >= 3, 'heartbeats during 700 ms of silence')
  t.match(events.at(-1), { type: 'result', result: { tool: 'claude_run', ok: true, output: 'slept 700', agent_report: { is_error: false } } })
})

t.test('text/event-stream gets the same events as SSE frames', async (t) => {
  const app = await build(t)
  const base = await listen(t, app)
  const response = await start(base, 'crush_run', { task: '@drip 2 10' }, 'text/event-stream')
  t.match(response.headers.get('content-type'), /^text\/event-stream/)
  const text = await response.text()
  t.match(text, /^event: output\ndata: \{"type":"output","offset":0,"data":"tick 1\\n"\}\n\n/)
  t.match(text, /event: result\ndata: \{"type":"result","result":\{"tool":"crush_run","ok":true/)
})

t.test('the client closing the stream stops the agent and frees the slot', async (t) => {
  const pidFile = join(tempDir(t), 'agent.pid')
  const app = await build(t, { MAX_CRUSH_AGENTS: '1' })
  const base = await listen(t, app)
  const controller = new AbortController()
  const response = await start(base, 'crush_run', { task: `@drip 1000 50 ${pidFile}` }, 'application/x-ndjson', controller.signal)
  const reader = ndjsonEvents(response)
  t.match((await reader.next()).value, { type: 'output', data: 'tick 1\n' })
  const agent = await readPidFile(pidFile)
  controller.abort()
  await waitFor(() => !isAlive(agent), 5000, 'the agent to stop')
  await waitFor(() => app.slots.inUse('crush_run') === 0, 2000, 'the slot to come back')
  t.same({ alive: isAlive(agent), slots: app.slots.inUse('crush_run') }, { alive: false, slots: 0 }, 'stopped and freed')
})

t.test('the same refusals as JSON before any stream starts', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '1', CLAUDE_BIN: 'not-installed-claude' })
  const base = await listen(t, app)
  const invalid = await start(base, 'crush_run', { task: '' })
  t.equal(invalid.status, 400)
  t.match(invalid.headers.get('content-type'), /^application\/json/)
  t.match(await invalid.json(), { code: 'VALIDATION_ERROR' })
  const missing = await start(base, 'claude_run', { task: 'x' })
  t.equal(missing.status, 503)
  t.match(await missing.json(), { code: 'AGENT_NOT_INSTALLED' })
  const busy = start(base, 'crush_run', { task: '@sleep 800' })
  await waitFor(() => app.slots.inUse('crush_run') === 1, 5000, 'the slot to be taken')
  const refused = await start(base, 'crush_run', { task: 'x' })
  t.equal(refused.status, 429)
  t.match(await refused.json(), { code: 'AGENT_LIMIT_REACHED' })
  await (await busy).text()
})

t.test('a slow reader slows the agent down and loses nothing', async (t) => {
  const app = await build(t, { AGENT_OUTPUT_LIMIT_BYTES: '65536' })
  const base = await listen(t, app)
  const written = 16 * 1024 * 1024
  const response = await start(base, 'crush_run', { task: `@flood ${written}` })
  const reader = response.body!.getReader()
  // Read nothing for a while: the socket and the pipes fill up, and the agent has to wait.
  await new Promise((resolve) => setTimeout(resolve, 500))
  t.equal(app.slots.inUse('crush_run'), 1, 'the agent is still running, held back by the reader')
  const decoder = new TextDecoder()
  let text = ''
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += decoder.decode(chunk.value, { stream: true })
  const events = text.trim().split('\n').map((line) => JSON.parse(line) as RunEvent)
  const streamed = events.filter((event) => event.type === 'output').reduce((sum, event) => sum + Buffer.byteLength((event as { data: string }).data), 0)
  t.equal(streamed, written + Buffer.byteLength('flooded\n'), 'every byte reached the stream')
  t.match(events.at(-1), { type: 'result', result: { ok: true, output_truncated: true, output_bytes: written + 8 } })
})

t.test('claude followed live prints its progress as stream-json, and the result is still parsed', async (t) => {
  const app = await build(t)
  const base = await listen(t, app)
  const events: RunEvent[] = []
  for await (const event of ndjsonEvents(await start(base, 'claude_run', { task: '@sleep 50' }))) events.push(event)
  const streamed = events.filter((event) => event.type === 'output').map((event) => (event as { data: string }).data).join('')
  t.match(streamed, /^\{"type":"system","subtype":"init"/, 'progress events reached the stream first')
  t.match(streamed, /"type":"assistant"/)
  const result = events.at(-1) as Extract<RunEvent, { type: 'result' }>
  t.ok(result.result.command.includes('stream-json') && result.result.command.includes('--verbose'))
  t.match(result.result, { ok: true, output: 'slept 50', agent_report: { is_error: false, num_turns: 2 } }, 'the answer text, as the synchronous route gives it')
})

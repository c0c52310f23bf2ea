import t from 'tap'
import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, readFileSync } from 'node:fs'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { join } from 'node:path'
import { getDefaultHighWaterMark } from 'node:stream'
import {
  build,
  heldAgent,
  isAlive,
  linesIn,
  listen,
  ndjson,
  openStream,
  outputBytes,
  outputs,
  outputText,
  parseSse,
  readPidFile,
  refused,
  releaseStep,
  scenario,
  settledValue,
  tempDir,
  until,
  type ResultEvent,
  type RunEvent
} from '../helpers/index.js'

// Runs followed live (src/http/routes/tools.ts, src/http/event-writer.ts): NDJSON or SSE as Accept asks, each write as
// it comes, heartbeats, the reader's pace imposed on the agent, and the agent stopped when the reader leaves.

const KiB = 1024
const MiB = 1024 * KiB

async function collect(body: AsyncIterable<Uint8Array>): Promise<RunEvent[]> {
  const events: RunEvent[] = []
  for await (const event of ndjson(body)) events.push(event)
  return events
}

// Each test has its own service and port: side by side.
t.jobs = 3

t.test('chunks arrive while the agent still runs, then the same result as the synchronous route', async (t) => {
  const app = await build(t)
  const base = await listen(t, app)
  // Each tick waits until the test has seen the one before: the agent runs on until the stream has carried it.
  const steps = tempDir(t)
  const response = await openStream(base, 'crush_run', {
    task: scenario.gated(steps, 'out:tick-1', 'out:tick-2', 'out:tick-3')
  })
  t.equal(response.status, 200)
  t.match(response.headers.get('content-type'), /^application\/x-ndjson/)
  t.equal(response.headers.get('cache-control'), 'no-cache, no-transform')
  t.equal(response.headers.get('x-accel-buffering'), 'no')
  t.match(response.headers.get('x-request-id'), /^[0-9a-f-]{36}$/)

  const events: RunEvent[] = []
  for await (const event of ndjson(response.body!)) {
    if (events.length === 0) {
      t.not(event.type, 'result', 'the stream began before the result')
      t.equal(app.slots.inUse('crush_run'), 1, 'its first event came while the agent was running')
    }
    events.push(event)
    if (event.type === 'output') releaseStep(steps, linesIn(events))
  }
  t.same(outputs(events).slice(0, 2).map((event) => event.data), ['tick-1\n', 'tick-2\n'], 'each write as it came')
  t.equal(outputText(events), 'tick-1\ntick-2\ntick-3\ngated\n')
  let offset = 0
  for (const event of outputs(events)) {
    t.equal(event.offset, offset, 'the byte offset of each chunk')
    offset += Buffer.byteLength(event.data)
  }
  t.match(events.at(-1), {
    type: 'result',
    result: { tool: 'crush_run', ok: true, exit_code: 0, output: 'tick-1\ntick-2\ntick-3\ngated\n', output_bytes: 27 }
  })
})

t.test('a heartbeat while the agent is quiet', async (t) => {
  const app = await build(t, { STREAM_HEARTBEAT_MS: '50' })
  const base = await listen(t, app)
  // Quiet after its first line until the stream has carried three heartbeats, however slow the machine (a stream that
  // sends none leaves it to its deadline).
  const gates = tempDir(t)
  const task = scenario.gated(gates, 'out:before', 'out:after')
  const events: RunEvent[] = []
  const quiet = () => events.slice(events.findIndex((event) => event.type === 'output') + 1)
    .filter((event) => event.type === 'heartbeat').length
  for await (const event of ndjson((await openStream(base, 'crush_run', { task, timeout: 30 })).body!)) {
    events.push(event)
    if (outputs(events).length > 0 && quiet() >= 3) releaseStep(gates, 1)
  }
  t.equal(outputs(events)[0]?.data, 'before\n', 'its first line, then quiet')
  t.ok(quiet() >= 3, 'heartbeats while it was quiet, one due every 50 ms')
  t.match(events.at(-1), { type: 'result', result: { tool: 'crush_run', ok: true, output: 'before\nafter\ngated\n' } })
})

t.test('text/event-stream gets the same events as SSE frames', async (t) => {
  const app = await build(t)
  const base = await listen(t, app)
  const response = await openStream(base, 'crush_run', { task: scenario.drip(2, 10) }, { accept: 'text/event-stream' })
  t.match(response.headers.get('content-type'), /^text\/event-stream/)
  const text = await response.text()
  // How the agent's writes fall into reads is the pipe's business: the frames are checked, not where they split.
  t.match(
    text, /^event: output\ndata: \{"type":"output","offset":0,"data":"tick 1\\n/, 'the first frame, as SSE writes it'
  )
  const frames = parseSse(text)
  t.ok(
    frames.every((frame) => frame.event === frame.data.type && frame.id === undefined),
    'each frame names its event, with no id to resume'
  )
  t.equal(outputText(frames.map((frame) => frame.data)), 'tick 1\ntick 2\ndripped\n', 'the output, whole and in order')
  t.match(frames.at(-1), { event: 'result', data: { type: 'result', result: { tool: 'crush_run', ok: true } } })
})

t.test('the client closing the stream stops the agent and frees the slot', async (t) => {
  const pidFile = join(tempDir(t), 'agent.pid')
  const app = await build(t, { MAX_CRUSH_AGENTS: '1' })
  const base = await listen(t, app)
  const controller = new AbortController()
  const response = await openStream(
    base, 'crush_run', { task: scenario.drip(1000, 50, pidFile) }, { signal: controller.signal }
  )
  const reader = ndjson(response.body!)
  t.match((await reader.next()).value, { type: 'output', data: 'tick 1\n' })
  const agent = await readPidFile(pidFile)
  controller.abort()
  const after = await until(
    () => ({ alive: isAlive(agent), slots: app.slots.inUse('crush_run') }),
    (state) => !state.alive && state.slots === 0, 5000, 'the agent to stop and its slot to come back'
  )
  t.same(after, { alive: false, slots: 0 }, 'stopped and freed')
})

t.test('the same refusals as JSON before any stream starts', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '1', CLAUDE_BIN: 'not-installed-claude' })
  const base = await listen(t, app)
  const invalid = await openStream(base, 'crush_run', { task: '' })
  t.equal(invalid.status, 400)
  t.match(invalid.headers.get('content-type'), /^application\/json/)
  t.match(await invalid.json(), { code: 'VALIDATION_ERROR' })
  const missing = await openStream(base, 'claude_run', { task: 'x' })
  t.equal(missing.status, 503)
  t.match(await missing.json(), { code: 'AGENT_NOT_INSTALLED' })
  const held = heldAgent(t)
  const busy = openStream(base, 'crush_run', { task: held.task })
  await readPidFile(held.pidFile)
  const limited = await openStream(base, 'crush_run', { task: 'x' })
  t.equal(limited.status, 429)
  t.match(limited.headers.get('content-type'), /^application\/json/)
  t.match(await limited.json(), { code: 'AGENT_LIMIT_REACHED' })
  held.release()
  t.match(
    (await collect((await busy).body!)).at(-1), { type: 'result', result: { ok: true } },
    'the stream holding the slot went on'
  )
  t.equal((await refused(app, 'crush_run', { task: '' })).status, 400, 'and without Accept, the same answer')
})

/** Linux's default pipe capacity: 16 pages (libuv never resizes the pipes it makes). */
const pipeCapacity = (): number => 16 * Number(execFileSync('getconf', ['PAGESIZE'], { encoding: 'utf8' }))
/** The largest a socket buffer can grow to by itself (tcp_wmem, tcp_rmem: min, default, max). */
const socketBufferMax = (name: 'tcp_wmem' | 'tcp_rmem'): number =>
  Number(readFileSync(`/proc/sys/net/ipv4/${name}`, 'utf8').trim().split(/\s+/)[2])

/**
 * The most that can sit between an agent's write and a client that reads nothing: every buffer on the way, full. A
 * paused Node stream stops reading once its buffer reaches its high-water mark, but the read that got it there may
 * bring a whole chunk (libuv reads 64 KiB at a time), so each Node buffer counts as its mark plus one chunk. Bytes on
 * the connection are encoded events, never fewer than the agent's bytes they carry.
 */
function bufferBound(): { bytes: number; parts: Record<string, number> } {
  const chunk = 64 * KiB
  const mark = getDefaultHighWaterMark(false)
  const parts = {
    "the agent's stdout and stderr pipes": 2 * pipeCapacity(),
    "the service's paused reads of both pipes": 2 * (mark + chunk),
    "the service's response, written up to its mark": mark + chunk,
    'the send buffer (tcp_wmem max)': socketBufferMax('tcp_wmem'),
    'the receive buffer (tcp_rmem max)': socketBufferMax('tcp_rmem'),
    "the client's paused socket and response": 2 * (mark + chunk)
  }
  return { bytes: Object.values(parts).reduce((sum, bytes) => sum + bytes, 0), parts }
}

t.test('a reader that stops reading holds the agent back: it writes no more than the buffers between them hold, ' +
  'and nothing is lost', async (t) => {
  const app = await build(t)
  const base = await listen(t, app)
  const bound = bufferBound()
  // More than every buffer holds: an agent nothing held back would write it all while its reader reads nothing.
  const total = bound.bytes + 16 * MiB
  const counter = join(tempDir(t), 'written')
  const written = (): number => (existsSync(counter) ? Number(readFileSync(counter, 'utf8')) : 0)

  const request = httpRequest(`${base}/tools/crush_run`, {
    method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/x-ndjson' }
  })
  request.end(JSON.stringify({ task: scenario.floodCounted(counter, total) }))
  const [response] = (await once(request, 'response')) as [IncomingMessage]
  // From here the client reads nothing: a paused response stops reading its socket once its own buffer is full.
  response.pause()
  t.equal(response.statusCode, 200)
  await until(written, (bytes) => bytes > 0, 10_000, 'the agent to write')
  // The agent is held back once its count stops moving: 500 ms without a write completing, however loaded the machine.
  const held = await settledValue(written, 500, 30_000, "the agent's count to stop moving")
  t.equal(app.slots.inUse('crush_run'), 1, 'the agent still runs: held back, not finished')
  t.ok(held < total, `it has written ${held} of its ${total} bytes`)
  t.ok(
    held <= bound.bytes,
    `${held} bytes written while nobody read, within the ${bound.bytes} the buffers between agent and reader hold: ` +
      JSON.stringify(bound.parts)
  )

  response.resume()
  const events = await collect(response)
  t.equal(written(), total, 'once read, the agent wrote the rest')
  t.equal(outputBytes(events), total + Buffer.byteLength('flooded\n'), 'every byte reached the reader')
  t.match(events.at(-1), { type: 'result', result: { ok: true, output_truncated: true, output_bytes: total + 8 } })
})

t.test('claude followed live prints its progress as stream-json, and the result is still parsed', async (t) => {
  const app = await build(t)
  const base = await listen(t, app)
  const events = await collect((await openStream(base, 'claude_run', { task: scenario.sleep(50) })).body!)
  const streamed = outputText(events)
  t.match(streamed, /^\{"type":"system","subtype":"init"/, 'progress events reached the stream first')
  t.match(streamed, /"type":"assistant"/)
  const { result } = events.at(-1) as ResultEvent
  t.ok(result.command.includes('stream-json') && result.command.includes('--verbose'))
  t.match(
    result, { ok: true, output: 'slept 50', agent_report: { is_error: false, num_turns: 2 } },
    'the answer text, as the synchronous route gives it'
  )
})

import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { createRun, scenario, settled, startServer, tempDir, until } from '../test/helpers/index.js'

// What a run keeps is bounded by the output limit, whatever its agent wrote, and a finished run lives in the store (on
// disk with SQLite), not in the service's memory: the service does not grow with runs.

const rssMiB = (pid: number): number =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024

t.test('20 async runs each writing 64 MiB: ' +
  'the service stays within a bound that does not grow with the runs', async (t) => {
  // Every run is retained (the default 100). The JavaScript heap is capped at 96 MiB (at 64 MiB the service died once
  // in about five CI runs, at a GC peak): memory that grew with the runs would end it long before run 20.
  const { child, base } = await startServer(t, {
    AGENT_OUTPUT_LIMIT_BYTES: String(1 << 20),
    NODE_OPTIONS: '--max-old-space-size=96'
  })
  const pid = child.pid!
  const runOne = async (): Promise<void> => {
    const created = await createRun(base, { tool: 'crush_run', task: scenario.flood(64 << 20) })
    t.match(await settled(base, created.id, 60_000), { status: 'succeeded' })
  }
  let peak = 0
  for (let index = 0; index < 20; index++) {
    await runOne()
    peak = Math.max(peak, rssMiB(pid))
  }
  t.equal(child.exitCode, null, 'the service lived through 1.25 GiB of output within its 96 MiB heap')
  const listed = (await (await fetch(`${base}/runs`)).json()) as { runs: unknown[] }
  t.equal(listed.runs.length, 20, 'and still keeps all 20 runs, with their results and events')
  t.comment(`peak RSS: ${peak.toFixed(0)} MiB`)
  t.ok(peak < 256, `${peak.toFixed(0)} MiB at most, within the documented 256 MiB for this configuration`)
})

t.test('an MCP client that never reads its progress: ' +
  'the service stays flat while the agent writes 1 GiB', async (t) => {
  const dir = tempDir(t)
  const { child, base } = await startServer(t, {})
  const { port } = new URL(base)
  const countFile = join(dir, 'count')
  const gigabyte = 1 << 30
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: {
      name: 'crush_run',
      arguments: { task: scenario.floodCounted(countFile, gigabyte), timeout: 300 },
      _meta: { progressToken: 'p' }
    }
  })
  // A raw socket that sends its call and never reads a byte of the answer.
  const socket = connect(Number(port), '127.0.0.1')
  t.teardown(() => socket.destroy())
  socket.pause()
  socket.write(`POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\n` +
    `accept: application/json, text/event-stream\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
  const written = () => (existsSync(countFile) ? Number(readFileSync(countFile, 'utf8') || '0') : 0)
  await until(written, (bytes) => bytes >= gigabyte, 240_000, 'the agent to write its gigabyte')
  const peak = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid!}/status`, 'utf8'))![1]) / 1024
  t.comment(`peak RSS: ${peak.toFixed(0)} MiB`)
  t.ok(
    peak < 256,
    `${peak.toFixed(0)} MiB at most while 1 GiB went to progress nobody read (it grew past 1.3 GiB in 14 s before)`
  )
})

t.test('an A2A subscriber that never reads: ' +
  'the service stays flat while the agent reports 100,000 steps of 4 KiB each', async (t) => {
  const { child, base } = await startServer(t, {})
  const { port } = new URL(base)
  const rpc = (method: string, params: object) => ({ jsonrpc: '2.0', id: 1, method, params })
  const headers = { 'content-type': 'application/json', 'a2a-version': '1.0' }
  const message = {
    messageId: 'm1', role: 'ROLE_USER', parts: [{ text: scenario.loudCalls(100_000, 4096) }], metadata: { timeout: 600 }
  }
  const sent = await fetch(`${base}/a2a/claude_run`, {
    method: 'POST',
    headers,
    body: JSON.stringify(rpc('SendMessage', { message, configuration: { returnImmediately: true } }))
  })
  const { result } = await sent.json() as { result: { task: { id: string } } }
  const id = result.task.id
  // A raw socket that subscribes to the task and never reads a byte of its stream.
  const body = JSON.stringify(rpc('SubscribeToTask', { id }))
  const socket = connect(Number(port), '127.0.0.1')
  t.teardown(() => socket.destroy())
  socket.pause()
  socket.write(`POST /a2a/claude_run HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\n` +
    `a2a-version: 1.0\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
  const state = async () => {
    const answer = await fetch(`${base}/a2a/claude_run`, {
      method: 'POST', headers, body: JSON.stringify(rpc('GetTask', { id, historyLength: 0 }))
    })
    return ((await answer.json()) as { result: { status: { state: string } } }).result.status.state
  }
  const ended = await until(state, (now) => now !== 'TASK_STATE_WORKING', 400_000, 'the agent to end')
  t.equal(ended, 'TASK_STATE_COMPLETED')
  const peak = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid!}/status`, 'utf8'))![1]) / 1024
  t.comment(`peak RSS: ${peak.toFixed(0)} MiB`)
  t.ok(peak < 256, `${peak.toFixed(0)} MiB at most while 400 MiB of steps went to a subscriber who read none`)
})

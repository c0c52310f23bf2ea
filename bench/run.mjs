// npm run bench: what agent-runner adds to running an agent, measured side by side in one run on this machine.
// A and B alternate over several rounds and the medians are compared; absolute numbers depend on the machine, ratios
// much less. autocannon runs as a separate process so the load generator does not share the service's event loop.
// Prints a markdown table and writes it to bench/results.md.
import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync, writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import pino from 'pino'
import { buildApp, loggerOptions } from '../dist/http/app.js'
import { loadConfig } from '../dist/config.js'

const run = promisify(execFile)
const ROOT = fileURLToPath(new URL('..', import.meta.url))
const AUTOCANNON = fileURLToPath(new URL('../node_modules/autocannon/autocannon.js', import.meta.url))
const INSTANT_AGENT = '/bin/true'
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3)
const CONCURRENCY = 4

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]

/** A: the agent spawned by a tight Node loop, CONCURRENCY at a time, output captured as the service does. */
async function rawSpawnLoop(args) {
  const latencies = []
  const deadline = performance.now() + SECONDS * 1000
  const worker = async () => {
    while (performance.now() < deadline) {
      const started = performance.now()
      const child = spawn(INSTANT_AGENT, args, { stdio: ['ignore', 'pipe', 'pipe'] })
      child.stdout.on('data', () => {})
      child.stderr.on('data', () => {})
      await once(child, 'close')
      latencies.push(performance.now() - started)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  latencies.sort((a, b) => a - b)
  return { rps: latencies.length / SECONDS, p50: percentile(latencies, 50), p99: percentile(latencies, 99) }
}

/** B: HTTP load from autocannon in its own process. */
async function autocannon(url, body, connections = CONCURRENCY) {
  const { stdout } = await run(process.execPath, [
    AUTOCANNON, '--json', '--no-progress', '-c', String(connections), '-d', String(SECONDS),
    '-m', 'POST', '-H', 'content-type=application/json', '-b', body, url
  ], { maxBuffer: 64 * 1024 * 1024 })
  const result = JSON.parse(stdout)
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, statuses: result.statusCodeStats ?? {} }
}

function appConfig(extra = {}) {
  return loadConfig({ LOG_LEVEL: 'info', CRUSH_BIN: INSTANT_AGENT, MAX_CRUSH_AGENTS: String(CONCURRENCY), ...extra })
}

async function startInProcess(config, addRoutes = () => {}) {
  // The service's real logger settings, written to /dev/null: log formatting is part of the cost being measured.
  const app = await buildApp(config, { logger: { ...loggerOptions(config), stream: pino.destination('/dev/null') } })
  addRoutes(app)
  const base = await app.listen({ host: '127.0.0.1', port: 0 })
  return { app, base }
}

async function syncOverhead() {
  const { app, base } = await startInProcess(appConfig())
  const raw = []
  const http = []
  for (let round = 0; round < ROUNDS; round++) {
    raw.push(await rawSpawnLoop(['run', '--', 'bench']))
    http.push(await autocannon(`${base}/tools/crush_run`, '{"task":"bench"}'))
  }
  await app.close()
  const a = { rps: median(raw.map((r) => r.rps)), p50: median(raw.map((r) => r.p50)), p99: median(raw.map((r) => r.p99)) }
  const b = { rps: median(http.map((r) => r.rps)), p50: median(http.map((r) => r.p50)), p99: median(http.map((r) => r.p99)) }
  return { a, b, ratio: b.rps / a.rps, addedP50: b.p50 - a.p50, addedP99: b.p99 - a.p99 }
}

async function rejectionPaths() {
  const { app, base } = await startInProcess(appConfig({ MAX_CRUSH_AGENTS: '1' }), (server) => {
    // The yardstick: a route with the same body schema doing nothing, on the same server.
    server.post('/bench/trivial', { schema: { body: { type: 'object', properties: { task: { type: 'string', minLength: 1 } }, required: ['task'] } } }, async () => ({ ok: true }))
  })
  const held = await app.slots.acquire('crush_run') // every crush_run now answers 429
  const trivial = []
  const limited = []
  const invalid = []
  for (let round = 0; round < ROUNDS; round++) {
    trivial.push((await autocannon(`${base}/bench/trivial`, '{"task":"x"}', 10)).rps)
    limited.push((await autocannon(`${base}/tools/crush_run`, '{"task":"x"}', 10)).rps)
    invalid.push((await autocannon(`${base}/tools/crush_run`, '{"task":""}', 10)).rps)
  }
  held.release()
  await app.close()
  const yardstick = median(trivial)
  return { trivial: yardstick, limited: median(limited), invalid: median(invalid), ratio429: median(limited) / yardstick, ratio400: median(invalid) / yardstick }
}

/** The service as `npm start` runs it, in its own process, with the stand-in agents. */
async function startService() {
  const env = { ...process.env, PORT: '0', LOG_LEVEL: 'info', PATH: `${ROOT}test/fixtures/bin:${process.env.PATH}` }
  const server = spawn(process.execPath, [`${ROOT}dist/server.js`], { env, stdio: ['ignore', 'pipe', 'inherit'] })
  let seen = ''
  const base = await new Promise((resolve) => server.stdout.on('data', (chunk) => {
    seen += chunk
    const match = /Server listening at (http:\/\/[\d.:]+)/.exec(seen)
    if (match) resolve(match[1])
  }))
  return { server, base }
}

/** From the agent's write (its monotonic clock, shared by all processes here) to the streaming client's receipt. */
async function streamingLatency() {
  const { server, base } = await startService()
  const latencies = []
  for (let round = 0; round < ROUNDS; round++) {
    const response = await fetch(`${base}/tools/crush_run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/x-ndjson' },
      body: JSON.stringify({ task: '@stamp 100 10' })
    })
    let pending = ''
    for await (const chunk of response.body) {
      const received = process.hrtime.bigint()
      pending += Buffer.from(chunk).toString()
      const lines = pending.split('\n')
      pending = lines.pop()
      for (const line of lines) {
        const event = JSON.parse(line)
        if (event.type !== 'output') continue
        for (const stamp of event.data.split('\n').filter((text) => /^\d+$/.test(text))) latencies.push(Number(received - BigInt(stamp)) / 1e6)
      }
    }
  }
  server.kill('SIGTERM')
  await once(server, 'exit')
  latencies.sort((a, b) => a - b)
  return { count: latencies.length, p50: percentile(latencies, 50), p99: percentile(latencies, 99) }
}

async function memoryWhileFlooding() {
  const { server, base } = await startService()
  const rssKb = (field) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))[1])
  const idle = rssKb('VmRSS')
  const gigabyte = 1024 ** 3
  const started = performance.now()
  const response = await fetch(`${base}/tools/crush_run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task: `@flood ${gigabyte}` }) })
  const result = await response.json()
  const seconds = (performance.now() - started) / 1000
  const peak = rssKb('VmHWM')
  server.kill('SIGTERM')
  await once(server, 'exit')
  return { idleMb: idle / 1024, peakMb: peak / 1024, bytes: result.output_bytes, seconds }
}

const procStatus = (pid, field) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1])
/** CPU seconds the process has used (user + system), from /proc. */
const cpuSeconds = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/** Reads an SSE response to its end; returns how many bytes came. */
async function drain(response) {
  let bytes = 0
  for await (const chunk of response.body) bytes += chunk.length
  return bytes
}

async function startAsyncRun(base, task) {
  const response = await fetch(`${base}/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tool: 'crush_run', task }) })
  return (await response.json()).id
}

/** An async run of 1 GiB followed by one SSE reader from its start: the service's peak RSS, to compare with the sync route's. */
async function asyncRelayMemory() {
  const { server, base } = await startService()
  const started = performance.now()
  const id = await startAsyncRun(base, `@flood ${1024 ** 3}`)
  await drain(await fetch(`${base}/runs/${id}/events`))
  const seconds = (performance.now() - started) / 1000
  const peak = procStatus(server.pid, 'VmHWM')
  server.kill('SIGTERM')
  await once(server, 'exit')
  return { peakMb: peak / 1024, seconds }
}

/** 200 followers of one 20 MB async run, all from its start: the service's CPU and peak RSS while it serves them. */
async function manyFollowers() {
  const { server, base } = await startService()
  const idle = procStatus(server.pid, 'VmRSS')
  const cpuBefore = cpuSeconds(server.pid)
  const id = await startAsyncRun(base, `@flood ${20 * 1024 ** 2}`)
  const started = performance.now()
  const bytes = await Promise.all(Array.from({ length: 200 }, async () => drain(await fetch(`${base}/runs/${id}/events`))))
  const seconds = (performance.now() - started) / 1000
  const cpu = cpuSeconds(server.pid) - cpuBefore
  const peak = procStatus(server.pid, 'VmHWM')
  server.kill('SIGTERM')
  await once(server, 'exit')
  return { followers: bytes.length, cpu, seconds, idleMb: idle / 1024, peakMb: peak / 1024 }
}

const fixed = (value, digits = 2) => Number(value).toFixed(digits)
const verdict = (ok) => (ok ? 'met' : '**missed**')

const overhead = await syncOverhead()
const rejections = await rejectionPaths()
const memory = await memoryWhileFlooding()
const asyncMemory = await asyncRelayMemory()
const followers = await manyFollowers()
const streaming = await streamingLatency()
const versions = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8'))

const table = `# agent-runner benchmark

${new Date().toISOString().slice(0, 10)} · ${cpus().length} × ${cpus()[0]?.model.trim()} · ${Math.round(totalmem() / 1024 ** 3)} GiB ·
Node ${process.version} · fastify ${JSON.parse(readFileSync(`${ROOT}node_modules/fastify/package.json`, 'utf8')).version} ·
agent-runner ${versions.version} · ${ROUNDS} rounds of ${SECONDS} s, A and B alternating, medians.

| measure | A | B | B / A or B − A | target | |
|---|---|---|---|---|---|
| sync run throughput, concurrency ${CONCURRENCY} (A: Node spawn loop, B: POST /tools/crush_run) | ${fixed(overhead.a.rps, 0)} runs/s | ${fixed(overhead.b.rps, 0)} req/s | ${fixed(overhead.ratio)}× | ≥ 0.75× | ${verdict(overhead.ratio >= 0.75)} |
| added latency p50 | ${fixed(overhead.a.p50)} ms | ${fixed(overhead.b.p50)} ms | +${fixed(overhead.addedP50)} ms | ≤ 0.5 ms | ${verdict(overhead.addedP50 <= 0.5)} |
| added latency p99 | ${fixed(overhead.a.p99)} ms | ${fixed(overhead.b.p99)} ms | +${fixed(overhead.addedP99)} ms | | |
| 429 rejections (A: trivial validated route) | ${fixed(rejections.trivial, 0)} req/s | ${fixed(rejections.limited, 0)} req/s | ${fixed(rejections.ratio429)}× | ≥ 0.8× | ${verdict(rejections.ratio429 >= 0.8)} |
| 400 rejections (A: trivial validated route) | ${fixed(rejections.trivial, 0)} req/s | ${fixed(rejections.invalid, 0)} req/s | ${fixed(rejections.ratio400)}× | ≥ 0.8× | ${verdict(rejections.ratio400 >= 0.8)} |
| peak RSS while one agent writes ${fixed(memory.bytes / 1024 ** 3, 1)} GB (A: idle RSS) | ${fixed(memory.idleMb, 0)} MB | ${fixed(memory.peakMb, 0)} MB | took ${fixed(memory.seconds, 1)} s | ≤ 150 MB | ${verdict(memory.peakMb <= 150)} |
| peak RSS, 1 GiB relayed (A: sync route; B: async run + one SSE follower) | ${fixed(memory.peakMb, 0)} MB | ${fixed(asyncMemory.peakMb, 0)} MB | ${fixed(asyncMemory.peakMb / memory.peakMb)}× | ≤ 1.5× | ${verdict(asyncMemory.peakMb <= 1.5 * memory.peakMb)} |
| ${followers.followers} SSE followers of one 20 MB async run (A: idle RSS; B: peak RSS) | ${fixed(followers.idleMb, 0)} MB | ${fixed(followers.peakMb, 0)} MB | ${fixed(followers.cpu, 1)} s CPU, ${fixed(followers.seconds, 1)} s wall | | |
| streaming latency p50, agent write → client receipt (${streaming.count} writes) | | ${fixed(streaming.p50)} ms | | ≤ 10 ms | ${verdict(streaming.p50 <= 10)} |
| streaming latency p99 | | ${fixed(streaming.p99)} ms | | ≤ 10 ms | ${verdict(streaming.p99 <= 10)} |

Latency for B is autocannon's (HTTP round trip, whole milliseconds); for A, the spawn-to-close time of the same agent.

${readFileSync(`${ROOT}bench/findings.md`, 'utf8')}`

process.stdout.write(table)
writeFileSync(`${ROOT}bench/results.md`, table)

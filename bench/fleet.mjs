// Issue 40's rows: runs handed to the fleet's workers through BullMQ (an API replica, ROLE=api, and workers, ROLE=worker,
// on a redis-server of the bench's own) against one process running them itself (ROLE=all, its own in-process queue).
// Each pair measured back to back. The agent is a shell script that notes, in nanoseconds, when it starts and when it
// ends: a run's turn → spawn latency is its start after the end of the run before it (one slot), the same clock for all.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
/** Runs drained by the fleet's three workers against one process (issue 40: 1,000). */
export const DRAINED_RUNS = Number(process.env.BENCH_DRAINED_RUNS ?? 1000)
/** Runs waiting on an API replica while its /healthz is timed (issue 40: 500). */
export const HEALTH_QUEUED = Number(process.env.BENCH_HEALTH_QUEUED ?? 500)
/** The queue depths the turn → spawn latency is measured at, each over at least LATENCY_SAMPLES turns. */
export const DEPTHS = [1, 10, 100]
const LATENCY_SAMPLES = 100
const WORKERS = 3
/** The fleet's limit while draining, and one process's: two runs at a time on each of the three workers. */
const DRAIN_LIMIT = 2 * WORKERS

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]

async function freePort() {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address()
  server.close()
  return port
}

async function startRedis() {
  const port = await freePort()
  const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'inherit']
  })
  let seen = ''
  await new Promise((resolve, reject) => {
    redis.stdout.on('data', (chunk) => {
      seen += chunk
      if (seen.includes('Ready to accept connections')) resolve()
    })
    redis.once('exit', (code) => reject(new Error(`redis-server exited with ${code}`)))
  })
  redis.stdout.resume()
  return { url: `redis://127.0.0.1:${port}`, stop: () => redis.kill('SIGKILL') }
}

/**
 * The agent: notes its start and its end in its log; a task of `gate` holds its slot until `open()` (so that the runs
 * asked for after it queue behind it, however fast each is).
 */
function notingAgent(dir) {
  const log = join(dir, 'agent.log')
  const gate = join(dir, 'gate')
  const agent = join(dir, 'agent')
  writeFileSync(agent, `#!/bin/sh
echo "start $(date +%s%N)" >> ${log}
for last; do :; done
if [ "$last" = gate ]; then while [ ! -e ${gate} ]; do sleep 0.01; done; fi
echo "end $(date +%s%N)" >> ${log}
`)
  chmodSync(agent, 0o755)
  const events = () => existsSync(log)
    ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map((line) => {
      const [event, ns] = line.split(' ')
      return { event, ms: Number(BigInt(ns) / 1000n) / 1000 }
    })
    : []
  return { agent, events, open: () => writeFileSync(gate, ''), close: () => rmSync(gate, { force: true }) }
}

/**
 * One process (`all`) or an API replica with WORKERS workers (`fleet`), all with `env`; `base` is where runs are asked
 * for. Ready once the API replica sees a worker.
 */
async function startSetup(startService, shape, env) {
  if (shape === 'all') {
    const service = await startService(env)
    return { base: service.base, pid: service.child.pid, stop: service.stop }
  }
  const redis = await startRedis()
  const fleetEnv = { ...env, SLOTS_BACKEND: 'redis', REDIS_URL: redis.url }
  const api = await startService({ ...fleetEnv, ROLE: 'api' })
  const dir = mkdtempSync(join(tmpdir(), 'agent-runner-bench-workers-'))
  const workers = await Promise.all(Array.from({ length: WORKERS }, async (_, index) => {
    const healthFile = join(dir, `worker-${index}`)
    const child = spawn(process.execPath, [`${ROOT}dist/server.js`], {
      env: { ...process.env, LOG_LEVEL: 'warn', DATA_DIR: mkdtempSync(join(dir, 'data-')), ...fleetEnv, ROLE: 'worker', HEALTH_FILE: healthFile },
      stdio: ['ignore', 'ignore', 'inherit']
    })
    while (!existsSync(healthFile)) {
      if (child.exitCode !== null) throw new Error(`a worker exited with ${child.exitCode}`)
      await sleep(50)
    }
    return child
  }))
  while ((await fetch(`${api.base}/readyz`)).status !== 200) await sleep(50)
  return {
    base: api.base,
    pid: api.child.pid,
    stop: async () => {
      await Promise.all(workers.map(async (worker) => {
        worker.kill('SIGTERM')
        if (worker.exitCode === null) await once(worker, 'exit')
      }))
      await api.stop()
      redis.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

const startRun = async (base, task) => {
  const response = await fetch(`${base}/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tool: 'crush_run', task, queue_timeout: 1800 })
  })
  if (response.status !== 202 && response.status !== 200) throw new Error(`POST /runs answered ${response.status}: ${await response.text()}`)
  return (await response.json()).id
}

async function untilEnded(events, count) {
  while (events().filter(({ event }) => event === 'end').length < count) await sleep(20)
}

/** Each start's delay after the end before it: one slot, so a turn comes when the run before it ends. */
function turnDelays(events) {
  const inOrder = [...events].sort((a, b) => a.ms - b.ms)
  const delays = []
  let lastEnd
  for (const { event, ms } of inOrder) {
    if (event === 'end') lastEnd = ms
    else if (lastEnd !== undefined) delays.push(ms - lastEnd)
  }
  return delays
}

/** Turn → spawn delays with `depth` runs queued behind one running, over enough rounds for LATENCY_SAMPLES turns. */
async function turnLatency(startService, shape, depth) {
  const dir = mkdtempSync(join(tmpdir(), 'agent-runner-bench-turns-'))
  const { agent, events, open, close } = notingAgent(dir)
  const setup = await startSetup(startService, shape, {
    CRUSH_BIN: agent, MAX_CRUSH_AGENTS: '1', WORKER_MAX_CRUSH_AGENTS: '1', AGENT_CONTAINMENT: 'process-group'
  })
  const delays = []
  try {
    for (let ended = 0; delays.length < LATENCY_SAMPLES;) {
      const before = events().length
      await startRun(setup.base, 'gate')
      // One after another: each is queued behind the ones before it, in order.
      for (let run = 0; run < depth; run++) await startRun(setup.base, `turn ${run}`)
      open()
      ended += depth + 1
      await untilEnded(events, ended)
      close()
      delays.push(...turnDelays(events().slice(before)))
    }
  } finally {
    await setup.stop()
    rmSync(dir, { recursive: true, force: true })
  }
  delays.sort((a, b) => a - b)
  return { p50: percentile(delays, 50), p99: percentile(delays, 99) }
}

/** DRAINED_RUNS instant runs asked for at once, DRAIN_LIMIT at a time: runs per second until the last one ended. */
async function drain(startService, shape) {
  const dir = mkdtempSync(join(tmpdir(), 'agent-runner-bench-drain-'))
  const { agent, events } = notingAgent(dir)
  const setup = await startSetup(startService, shape, {
    CRUSH_BIN: agent,
    MAX_CRUSH_AGENTS: String(DRAIN_LIMIT),
    WORKER_MAX_CRUSH_AGENTS: String(DRAIN_LIMIT / WORKERS),
    MAX_QUEUED_CRUSH: String(DRAINED_RUNS),
    AGENT_CONTAINMENT: 'process-group'
  })
  try {
    const started = performance.now()
    await Promise.all(Array.from({ length: DRAINED_RUNS }, (_, run) => startRun(setup.base, `drained ${run}`)))
    await untilEnded(events, DRAINED_RUNS)
    return DRAINED_RUNS / ((performance.now() - started) / 1000)
  } finally {
    await setup.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

/** An API replica's /healthz p99 idle, then with HEALTH_QUEUED runs waiting behind one that holds the only slot. */
async function healthWithQueued(startService, latencyProbe) {
  const dir = mkdtempSync(join(tmpdir(), 'agent-runner-bench-queued-'))
  const { agent, events } = notingAgent(dir)
  const setup = await startSetup(startService, 'fleet', {
    CRUSH_BIN: agent,
    MAX_CRUSH_AGENTS: '1',
    WORKER_MAX_CRUSH_AGENTS: '1',
    MAX_QUEUED_CRUSH: String(HEALTH_QUEUED),
    AGENT_CONTAINMENT: 'process-group'
  })
  try {
    const idle = await latencyProbe(`${setup.base}/healthz`)
    await startRun(setup.base, 'gate')
    while (events().length === 0) await sleep(20)
    await Promise.all(Array.from({ length: HEALTH_QUEUED }, (_, run) => startRun(setup.base, `queued ${run}`)))
    const loaded = await latencyProbe(`${setup.base}/healthz`)
    return { idleP99: idle.p99, loadedP99: loaded.p99 }
  } finally {
    await setup.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

/** One pass over issue 40's rows. `latencyProbe(url)` times GET requests one at a time: { p50, p99 } in ms. */
export async function fleetOnce(startService, latencyProbe) {
  const measured = {}
  for (const depth of DEPTHS) {
    const local = await turnLatency(startService, 'all', depth)
    const fleet = await turnLatency(startService, 'fleet', depth)
    Object.assign(measured, {
      [`turnLocalP50_${depth}`]: local.p50,
      [`turnLocalP99_${depth}`]: local.p99,
      [`turnFleetP50_${depth}`]: fleet.p50,
      [`turnFleetP99_${depth}`]: fleet.p99,
      [`turnRatioP50_${depth}`]: fleet.p50 / local.p50,
      [`turnRatioP99_${depth}`]: fleet.p99 / local.p99
    })
  }
  const oneProcess = await drain(startService, 'all')
  const workers = await drain(startService, 'fleet')
  const health = await healthWithQueued(startService, latencyProbe)
  return {
    ...measured,
    drainOneRps: oneProcess,
    drainFleetRps: workers,
    drainRatio: workers / oneProcess,
    queuedIdleP99: health.idleP99,
    queuedLoadedP99: health.loadedP99,
    queuedHealthRatio: health.loadedP99 / health.idleP99
  }
}

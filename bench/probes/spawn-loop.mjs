// The yardstick for running agents: a bare Node process spawning the agent in a tight loop, `concurrency` at a time,
// output captured as the service does. argv: concurrency seconds file args… ; prints {"rps", "p50", "p99"} (ms).
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { performance } from 'node:perf_hooks'

const [concurrency, seconds, file, ...args] = process.argv.slice(2)
const latencies = []
const deadline = performance.now() + Number(seconds) * 1000
const worker = async () => {
  while (performance.now() < deadline) {
    const started = performance.now()
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout.on('data', () => {})
    child.stderr.on('data', () => {})
    await once(child, 'close')
    latencies.push(performance.now() - started)
  }
}
await Promise.all(Array.from({ length: Number(concurrency) }, worker))
latencies.sort((a, b) => a - b)
const at = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]
process.stdout.write(JSON.stringify({ rps: latencies.length / Number(seconds), p50: at(50), p99: at(99) }))

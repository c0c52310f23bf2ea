// Request latency with sub-millisecond resolution (autocannon's is whole milliseconds): one request at a time on a
// kept-alive connection, for `seconds`. argv: seconds method url [body] ; prints {"count", "p50", "p99"} (ms).
import { request, Agent } from 'node:http'
import { performance } from 'node:perf_hooks'

const [seconds, method, url, body] = process.argv.slice(2)
const agent = new Agent({ keepAlive: true, maxSockets: 1 })
const once = () => new Promise((resolve, reject) => {
  const req = request(url, { method, agent, headers: body === undefined ? {} : { 'content-type': 'application/json' } }, (res) => {
    res.on('data', () => {})
    res.on('end', () => resolve(res.statusCode))
  })
  req.on('error', reject)
  req.end(body)
})
const latencies = []
const deadline = performance.now() + Number(seconds) * 1000
while (performance.now() < deadline) {
  const started = performance.now()
  const status = await once()
  if (status !== 200) throw new Error(`${method} ${url} answered ${status}`)
  latencies.push(performance.now() - started)
}
latencies.sort((a, b) => a - b)
const at = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]
process.stdout.write(JSON.stringify({ count: latencies.length, p50: at(50), p99: at(99) }))
agent.destroy()

// The yardstick for webhook deliveries: signed-size POSTs from a bare Node loop, `concurrency` at a time, one new
// connection each (as each delivery makes), until `total` are answered. argv: url concurrency total body ; prints
// {"perSecond"}.
import { request } from 'node:http'
import { performance } from 'node:perf_hooks'

const [url, concurrency, total, body] = process.argv.slice(2)
const post = () => new Promise((resolve, reject) => {
  const req = request(url, {
    method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }
  }, (res) => {
    res.resume()
    res.on('end', resolve)
  })
  req.on('error', reject)
  req.end(body)
})
let started = 0
const started0 = performance.now()
await Promise.all(Array.from({ length: Number(concurrency) }, async () => {
  while (started < Number(total)) {
    started++
    await post()
  }
}))
process.stdout.write(JSON.stringify({ perSecond: Number(total) / ((performance.now() - started0) / 1000) }))

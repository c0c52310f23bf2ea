// A webhook receiver for the bench, in a process of its own. argv: mode, `hold` (accepts each request and answers
// none) or `ok` (204 to each). Prints {"port"} once listening. Reads commands on stdin: `ok` answers what it holds and
// every later request (204); `count` prints {"count", "firstMs", "lastMs"}: the requests answered so far, and when
// (performance.now()) the first and the last were.
import { createServer } from 'node:http'
import { createInterface } from 'node:readline'
import { performance } from 'node:perf_hooks'

let mode = process.argv[2]
const held = []
let count = 0
let firstMs = null
let lastMs = null
const answer = (response) => {
  count++
  lastMs = performance.now()
  firstMs ??= lastMs
  response.writeHead(204).end()
}
const server = createServer((request, response) => {
  request.resume()
  request.on('end', () => (mode === 'hold' ? held.push(response) : answer(response)))
})
server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`))
createInterface({ input: process.stdin }).on('line', (command) => {
  if (command === 'ok') {
    mode = 'ok'
    for (const response of held.splice(0)) answer(response)
  } else {
    process.stdout.write(`${JSON.stringify({ count, firstMs, lastMs })}\n`)
  }
})

// The yardstick for relaying output: a bare Node process spawning the agent and draining its pipes, nothing else.
// argv: file args… ; prints {"bytes": n, "ms": t}.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { performance } from 'node:perf_hooks'

const [file, ...args] = process.argv.slice(2)
const started = performance.now()
const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] })
let bytes = 0
child.stdout.on('data', (chunk) => { bytes += chunk.length })
child.stderr.on('data', (chunk) => { bytes += chunk.length })
await once(child, 'close')
process.stdout.write(JSON.stringify({ bytes, ms: performance.now() - started }))

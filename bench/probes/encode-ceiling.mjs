// Where the NDJSON relay's ceiling is: turning 64 KiB chunks of ASCII into NDJSON output events (decode, JSON-escape,
// encode back to bytes), the work the relay cannot skip, in a bare Node process with no I/O. argv: bytes ; prints
// {"mbps"}.
const chunk = Buffer.alloc(64 * 1024, 'x')
const total = Number(process.argv[2])
const started = performance.now()
for (let offset = 0; offset < total; offset += chunk.length) {
  Buffer.from(`${JSON.stringify({ type: 'output', offset, data: chunk.toString('utf8') })}\n`)
}
process.stdout.write(JSON.stringify({ mbps: total / 1e6 / ((performance.now() - started) / 1000) }))

// Where the NDJSON relay's ceiling is: turning 64 KiB chunks into NDJSON output events (decode, JSON-escape, encode
// back to bytes), the work the relay cannot skip, in a bare Node process with no I/O. argv: bytes, then the lines a
// chunk repeats (as the stand-ins' `@flood-lines` takes them; none: the plain flood's `x`s) ; prints {"mbps"}.
const [bytes, ...lines] = process.argv.slice(2)
const unit = Buffer.from(lines.map((line) => `${line}\n`).join(''))
const chunk = lines.length === 0
  ? Buffer.alloc(64 * 1024, 'x')
  : Buffer.concat(Array.from({ length: Math.max(1, Math.floor(65536 / unit.length)) }, () => unit))
const total = Number(bytes)
const started = performance.now()
for (let offset = 0; offset < total; offset += chunk.length) {
  Buffer.from(`${JSON.stringify({ type: 'output', offset, data: chunk.toString('utf8') })}\n`)
}
process.stdout.write(JSON.stringify({ mbps: total / 1e6 / ((performance.now() - started) / 1000) }))

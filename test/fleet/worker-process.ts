import { appendFileSync, existsSync } from 'node:fs'
import { RunWorkers, type RunPlace } from '#src/fleet/run-jobs.js'

// A worker of the fleet in a process of its own, so that a test can kill it (test/fleet/run-jobs.test.ts). Each run it
// takes holds for `data.ms` milliseconds, fails with `data.fail` when given, and returns who ran it; its start and end
// are lines of FLEET_LOG. argv: <redis url> <prefix> <name> <concurrency as JSON, {"tool": n}> <lock duration in ms>
// <places as JSON, ["host", "wsl"]>

/** `until`: a file whose existence ends the run, after `ms` at least. */
interface Work { ms: number; fail?: string; until?: string }

const [url, prefix, name, concurrency, lockDurationMs, places] = process.argv.slice(2) as
  [string, string, string, string, string, string]
const log = (line: Record<string, unknown>): void => {
  appendFileSync(process.env['FLEET_LOG']!, `${JSON.stringify({ ...line, worker: name, at: Date.now() })}\n`)
}
const workers = new RunWorkers(
  { url, prefix, name, lockDurationMs: Number(lockDurationMs) },
  JSON.parse(concurrency) as Record<string, number>,
  async (tool, runId, data) => {
    const work = data as Work
    log({ run: runId, tool, event: 'start' })
    await new Promise((resolve) => setTimeout(resolve, work.ms))
    while (work.until !== undefined && !existsSync(work.until)) await new Promise((resolve) => setTimeout(resolve, 20))
    log({ run: runId, tool, event: 'end' })
    if (work.fail !== undefined) throw new Error(work.fail)
    return { ranBy: name }
  },
  JSON.parse(places) as RunPlace[]
)
await workers.ready()
log({ event: 'ready' })
process.on('SIGTERM', () => {
  void workers.close().then(() => {
    log({ event: 'closed' })
    process.exit(0)
  })
})

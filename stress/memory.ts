import t from 'tap'
import { readFileSync } from 'node:fs'
import { createRun, scenario, settled, startServer } from '../test/helpers/index.js'

// What a run keeps is bounded by the output limit, whatever its agent wrote, and a finished run lives in the store (on
// disk with SQLite), not in the service's memory: the service does not grow with runs.

const rssMiB = (pid: number): number => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024

t.test('20 async runs each writing 64 MiB: the service stays within a bound that does not grow with the runs', async (t) => {
  // Every run is retained (the default 100). The JavaScript heap is capped at 96 MiB (at 64 MiB the service died once
  // in about five CI runs, at a GC peak): memory that grew with the runs would end it long before run 20.
  const { child, base } = await startServer(t, {
    AGENT_OUTPUT_LIMIT_BYTES: String(1 << 20),
    NODE_OPTIONS: '--max-old-space-size=96'
  })
  const pid = child.pid!
  const runOne = async (): Promise<void> => {
    const created = await createRun(base, { tool: 'crush_run', task: scenario.flood(64 << 20) })
    t.match(await settled(base, created.id, 60_000), { status: 'succeeded' })
  }
  let peak = 0
  for (let index = 0; index < 20; index++) {
    await runOne()
    peak = Math.max(peak, rssMiB(pid))
  }
  t.equal(child.exitCode, null, 'the service lived through 1.25 GiB of output within its 96 MiB heap')
  const listed = (await (await fetch(`${base}/runs`)).json()) as { runs: unknown[] }
  t.equal(listed.runs.length, 20, 'and still keeps all 20 runs, with their results and events')
  t.comment(`peak RSS: ${peak.toFixed(0)} MiB`)
  t.ok(peak < 256, `${peak.toFixed(0)} MiB at most, within the documented 256 MiB for this configuration`)
})

import t from 'tap'
import { RunEventLog } from '#src/runs/event-log.js'
import { OutputEvents } from '#src/runs/output-events.js'
import { relayed, type RelayDeps } from '#src/runs/relay.js'
import { finishedStatus } from '#src/runs/result.js'
import { Run } from '#src/runs/run.js'
import { MemoryRunStore } from '#src/runs/stores/memory-store.js'
import type { RunRecord } from '#src/runs/stores/run-store.js'
import type { RunResult } from '#src/schemas/run.js'
import { until } from '../helpers/index.js'
import { runResult } from '../helpers/results.js'

// A synchronous or streamed run a fleet's worker runs, lived on its caller's replica from what the worker records in
// the store (src/runs/relay.ts): here the store is written as a worker's recorder writes it.

const RETENTION = { retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100 }

/** A stream run admitted here, whose worker has just started its agent. */
function handedRun(): Run {
  const run = new Run({ kind: 'stream', tool: 'crush_run', caller: 'alice', params: { task: 'relay me', timeout: 60 } })
  for (const next of ['placed', 'waiting_for_slot', 'starting'] as const) run.advance(next)
  return run
}

/** The run as its worker stores it once its agent runs. */
async function storedRunning(store: MemoryRunStore, run: Run): Promise<RunRecord> {
  const record: RunRecord = {
    id: run.id,
    caller: run.caller,
    tool: run.tool,
    kind: 'stream',
    status: 'running',
    createdAt: new Date().toISOString(),
    deadline: new Date(Date.now() + 60_000).toISOString(),
    finishedAt: null,
    result: null,
    replica: 'worker-1'
  }
  await store.create(record)
  return record
}

/** What its worker saves as its agent ends: its output, its result (none when it was lost), its final record. */
async function storedEnd(store: MemoryRunStore, record: RunRecord, outputs: string[], result: RunResult | null) {
  const log = new RunEventLog(1 << 20)
  const events = new OutputEvents()
  for (const text of outputs) log.appendOutput(events.next(Buffer.from(text))!)
  log.close(events.closing(result))
  await store.saveEvents(record.id, log.after(0), undefined)
  await store.finish({
    ...record, status: result === null ? 'lost' : finishedStatus(result), finishedAt: new Date().toISOString(), result
  })
}

const deps = (store: MemoryRunStore, stopElsewhere: RelayDeps['stopElsewhere'] = async () => undefined): RelayDeps =>
  ({ store, pollMs: 5, stopElsewhere })

t.test('each output is told to the run, and the next read once its reader took it; the result is the worker’s',
  async (t) => {
    const store = new MemoryRunStore(RETENTION)
    const run = handedRun()
    const record = await storedRunning(store, run)
    const result = runResult({ output: 'one two ' })
    await storedEnd(store, record, ['one ', 'two '], result)
    const told: string[] = []
    run.on('output', (chunk) => told.push(chunk.toString()))
    const written: string[] = []
    let resume: (() => void) | undefined
    const sink = {
      write: (chunk: Buffer) => written.push(chunk.toString()) > 1,
      onDrain: (then: () => void) => { resume = then }
    }
    let settled = false
    const relaying = relayed(run, sink, deps(store)).finally(() => { settled = true })
    await until(() => resume, (waiting) => waiting !== undefined, 5000, 'the relay to wait for its reader')
    t.equal(run.phase, 'running', 'it runs here, as its worker runs it')
    t.equal(run.snapshot().deadline, record.deadline, 'until the deadline its worker set')
    t.same(written, ['one '], 'nothing more while its reader is behind')
    t.notOk(settled)
    resume!()
    t.same(await relaying, result)
    t.same(written, ['one ', 'two '], 'the rest once it caught up')
    t.same(told, ['one ', 'two '], 'every chunk told to the run’s listeners')
  })

t.test('a stop here is passed on to the worker; its caller is told why it stopped here', async (t) => {
  const store = new MemoryRunStore(RETENTION)
  const run = handedRun()
  await storedRunning(store, run)
  const asked: RunRecord[] = []
  const stopElsewhere = async (running: RunRecord): Promise<void> => {
    asked.push(running)
    // What the worker does when asked: stops its agent, records that it was cancelled.
    await storedEnd(store, running, ['partial'], runResult({ ok: false, stop_reason: 'cancelled' }))
  }
  const relaying = relayed(run, undefined, deps(store, stopElsewhere))
  await until(() => run.phase, (phase) => phase === 'running', 5000, 'the run to be relayed')
  run.stop('client_gone')
  t.equal(run.phase, 'stopping')
  t.match(await relaying, { stop_reason: 'client_gone', ok: false })
  t.same(asked.map((each) => each.id), [run.id], 'its worker asked once')
})

t.test('its worker gone before its end: 503 RUN_LOST', async (t) => {
  const store = new MemoryRunStore(RETENTION)
  const run = handedRun()
  const record = await storedRunning(store, run)
  await storedEnd(store, record, ['half of it'], null)
  await t.rejects(relayed(run, undefined, deps(store)), { code: 'RUN_LOST' })
  const gone = handedRun()
  await t.rejects(relayed(gone, undefined, deps(store)), { code: 'RUN_LOST' }, 'and when its record is gone too')
})

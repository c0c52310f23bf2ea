import { serviceError } from '../errors.js'
import type { OutputSink } from '../process/agent-process.js'
import type { RunResult } from '../schemas/run.js'
import { parseFrame } from './events.js'
import { follow, storeSource } from './follow.js'
import type { Run } from './run.js'
import type { RunRecord, RunStore } from './stores/run-store.js'

export interface RelayDeps {
  store: RunStore
  /** How often the store is read for what the worker saved (its own save interval). */
  pollMs: number
  /** Asks the worker to stop the run, and waits (bounded) for its end to be recorded. */
  stopElsewhere: (record: RunRecord) => Promise<unknown>
}

/** Nothing stops the reading itself: it ends with the run's end in the store, whoever stopped the run. */
const UNTIL_ITS_END = new AbortController().signal

/**
 * A synchronous or streamed run that a fleet's worker runs, lived on the replica its caller is connected to: the
 * output, steps and end its worker records, read from the store as any replica follows an async run, told by the
 * run's own events (the route, MCP and the metrics listen to them as to a local run's); and every stop of it here
 * (its client gone, DELETE, shutdown) passed on to the worker. A reader that falls behind waits here, not the agent:
 * what the store's log dropped meanwhile (past the output limit) is skipped, as the result's middle is.
 */
export async function relayed(run: Run, sink: OutputSink | undefined, deps: RelayDeps): Promise<RunResult> {
  const record = await deps.store.get(run.id)
  if (record === undefined) throw serviceError('RUN_LOST', run.tool)
  run.runsElsewhere(record.deadline)
  const stop = (): void => {
    run.stopping(run.stopReason!)
    void deps.stopElsewhere(record)
  }
  if (run.stopped) stop()
  else run.signal.addEventListener('abort', stop, { once: true })
  let result: RunResult | undefined
  try {
    for await (const frames of follow(storeSource(deps.store, record, deps.pollMs), 0, 'both', UNTIL_ITS_END)) {
      for (const frame of frames) {
        const event = parseFrame(frame)
        if (event.type === 'output') await told(run, sink, Buffer.from(event.data))
        else if (event.type === 'step') run.emit('step', event.step)
        else if (event.type === 'result') result = event.result
      }
    }
  } finally {
    run.signal.removeEventListener('abort', stop)
  }
  if (result === undefined) throw serviceError('RUN_LOST', run.tool)
  // Its worker was asked to cancel it; why is this replica's to say (its client gone, shutdown).
  const { stopReason } = run
  const stoppedHere = stopReason !== undefined && result.stop_reason === 'cancelled'
  return stoppedHere ? { ...result, stop_reason: stopReason } : result
}

/** A chunk to the run's listeners, and to its live reader: the next is read once that reader has taken this one. */
async function told(run: Run, sink: OutputSink | undefined, chunk: Buffer): Promise<void> {
  run.output(chunk)
  if (sink === undefined || sink.write(chunk)) return
  await new Promise<void>((resolve) => { sink.onDrain(resolve) })
}

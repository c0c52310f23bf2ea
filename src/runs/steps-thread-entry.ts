import { parentPort } from 'node:worker_threads'
import { BUILT_IN_AGENTS } from '../agents/catalog.js'
import type { AgentSpec, StepParser } from '../agents/spec.js'
import type { Step } from '../schemas/steps.js'
import { RunSteps } from './run-steps.js'
import { counted, type FromStepsThread, type ToStepsThread } from './steps-thread.js'

/** One run as the thread reads it: its steps, and the count of its bytes read that the relay's thread waits on. */
interface ThreadRun {
  steps: RunSteps
  read: Int32Array
  /** The steps of the chunk being read, for a run someone follows live. */
  told: Step[]
  sendSteps: boolean
}

const parsers = new Map<string, () => StepParser>(BUILT_IN_AGENTS.flatMap((spec: AgentSpec) =>
  spec.steps === undefined ? [] : [[spec.agent, () => spec.steps!()]]))
const runs = new Map<number, ThreadRun>()
const port = parentPort!

const tell = (message: FromStepsThread): void => { port.postMessage(message) }

function open(message: Extract<ToStepsThread, { type: 'open' }>): void {
  const parser = parsers.get(message.agent)
  if (parser === undefined) throw new Error(`no step parser for agent ${message.agent}`)
  const id = message.run
  const run: ThreadRun = {
    read: new Int32Array(message.read),
    told: [],
    sendSteps: false,
    steps: new RunSteps(parser(), {
      ...message.watch,
      onStep: (step) => { if (run.sendSteps) run.told.push(step) },
      onLimit: (reason) => {
        // The steps before it first: the run is stopped after the step that crossed it was told.
        flush(id, run)
        tell({ type: 'limit', run: id, reason })
      }
    })
  }
  runs.set(id, run)
}

/** Sends the steps read so far, with the bytes they came from (0: the rest of their chunk is still being read). */
function flush(id: number, run: ThreadRun, bytes = 0): void {
  if (run.told.length === 0) return
  tell({ type: 'steps', run: id, steps: run.told, bytes })
  run.told = []
}

port.on('message', (message: ToStepsThread) => {
  if (message.type === 'close') return port.close()
  if (message.type === 'open') return open(message)
  const run = runs.get(message.run)
  if (run === undefined) return
  if (message.type === 'chunk') {
    const { bytes } = message
    run.sendSteps = message.sendSteps
    run.steps.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))
    // A chunk whose steps are sent is counted read once the relay's thread has taken them: until then they wait in
    // its queue, and they are bounded with the bytes that waits for this thread.
    if (run.told.length > 0) flush(message.run, run, bytes.byteLength)
    else counted(run.read, bytes.byteLength)
    return
  }
  run.steps.end()
  flush(message.run, run)
  runs.delete(message.run)
  tell({ type: 'report', run: message.run, report: run.steps.report() })
})

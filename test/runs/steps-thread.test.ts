import t, { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { RunSteps, type StepsReport, type StepsWatch } from '#src/runs/run-steps.js'
import { STEPS_IN_FLIGHT_BYTES, StepsThread, type ThreadSteps } from '#src/runs/steps-thread.js'
import type { LimitReason } from '#src/schemas/limits.js'
import type { Step } from '#src/schemas/steps.js'
import { fromRoot } from '../helpers/root.js'

const structured = BUILT_IN_AGENTS.filter((spec) => spec.steps !== undefined && spec.steps().readsText !== true)
const CHUNK = 3000

/** A claude tool call and its result, 2 KiB of output in it: two steps a line, as the bench's flood. */
const CALL_LINES = Buffer.from([
  {
    type: 'assistant',
    message: { content: [{ type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls' } }] }
  },
  { type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'x'.repeat(2048) }] } }
].map((line) => `${JSON.stringify(line)}\n`).join(''))

/** The commands a report counts: those it lists, and those past its list. */
const commandsIn = (report: StepsReport | null): number =>
  (report?.steps_summary?.commands.length ?? 0) + (report?.steps_summary?.commands_omitted ?? 0)

/** Writes into a run's sink until it says it is behind; how many bytes that took. */
function writeUntilBehind(steps: ThreadSteps, chunk: Buffer, most: number): number {
  let written = 0
  while (written < most) {
    written += chunk.length
    if (!steps.sink.write(chunk)) return written
  }
  return written
}

const newThread = (t: Test, died: (error: Error) => void = () => {}): StepsThread => {
  const thread = new StepsThread(died)
  t.teardown(() => thread.close())
  return thread
}

for (const spec of structured) {
  const { agent } = spec
  t.test(`${agent}: the thread reads its recorded run into the same steps and report as the relay's`, async (t) => {
    const stream = readFileSync(fromRoot(`test/fixtures/streams/${agent}.out`))
    const watch = (told: Step[]): StepsWatch => ({ onStep: (step) => told.push(step), limits: { max_turns: 100 } })
    const here: Step[] = []
    const inThread = new RunSteps(spec.steps!(), watch(here))
    const there: Step[] = []
    const offThread = newThread(t).open(agent, watch(there), () => true)!
    for (let start = 0; start < stream.length; start += CHUNK) {
      inThread.push(stream.subarray(start, start + CHUNK))
      offThread.sink.write(stream.subarray(start, start + CHUNK))
    }
    inThread.end()
    const report = await offThread.end()
    t.ok(here.length > 0, 'the run has steps')
    t.same(there, here, 'each step told, in order')
    t.same(report, inThread.report(), 'its report: the answer, session, usage, summary')
  })
}

t.test('a run follows no steps: the thread reads them all the same, but sends none back', async (t) => {
  const told: Step[] = []
  const steps = newThread(t).open('claude', { onStep: (step) => told.push(step) }, () => false)!
  steps.sink.write(CALL_LINES)
  const report = await steps.end()
  t.equal(told.length, 0, 'no step crossed between threads')
  t.equal(commandsIn(report), 1, 'its result still counts them')
})

t.test('a limit crossed on the thread is told once, after the step that crossed it', async (t) => {
  const told: string[] = []
  const limited: LimitReason[] = []
  const steps = newThread(t).open('claude', {
    onStep: (step) => told.push(step.kind),
    limits: { max_turns: 1 },
    onLimit: (reason) => { limited.push(reason); told.push('limit') }
  }, () => true)!
  // Each call a turn: the next begins once its result has come.
  steps.sink.write(Buffer.concat([CALL_LINES, CALL_LINES, CALL_LINES]))
  const report = await steps.end()
  t.same(limited, ['max_turns'])
  t.equal(report?.limitCrossed, 'max_turns')
  t.ok(told.indexOf('limit') > 0 && told[told.indexOf('limit') - 1] !== 'limit', 'told after a step')
})

t.test(`what waits for the thread is bounded: past ${STEPS_IN_FLIGHT_BYTES} bytes the writer is told to wait, and ` +
  'resumed once the thread has read them', async (t) => {
  const steps = newThread(t).open('claude', {}, () => false)!
  const chunk = Buffer.concat(Array.from({ length: 24 }, () => CALL_LINES))
  // Written in one go, the thread cannot read as fast as it is handed bytes: each chunk costs it a parse.
  const written = writeUntilBehind(steps, chunk, 64 * STEPS_IN_FLIGHT_BYTES)
  t.ok(written < 64 * STEPS_IN_FLIGHT_BYTES, `told to wait after ${written} bytes`)
  t.ok(written > STEPS_IN_FLIGHT_BYTES, 'not before the bound')
  await new Promise<void>((resolve) => steps.sink.onDrain(resolve))
  const report = await steps.end()
  t.equal(commandsIn(report), (written / chunk.length) * 24, 'every call read, none lost')
})

t.test('a thread that fails ends what it was reading without steps, wakes its writers, and the next run gets a ' +
  'new thread', async (t) => {
  const failures: Error[] = []
  const thread = newThread(t, (error) => failures.push(error))
  const held = thread.open('claude', {}, () => false)!
  writeUntilBehind(held, Buffer.concat(Array.from({ length: 24 }, () => CALL_LINES)), 64 * STEPS_IN_FLIGHT_BYTES)
  const resumed = new Promise<void>((resolve) => held.sink.onDrain(resolve))
  // An agent the thread has no parser for: it throws, as a parser's bug would.
  thread.open('no-such-agent', {}, () => false)
  t.equal(await held.end(), null, 'no report from a dead thread')
  await resumed
  t.match(failures, [{ message: /no step parser for agent no-such-agent/ }], 'its failure told')
  const chunk = Buffer.concat(Array.from({ length: 24 }, () => CALL_LINES))
  t.ok(writeUntilBehind(held, chunk, 16 * STEPS_IN_FLIGHT_BYTES) >= 16 * STEPS_IN_FLIGHT_BYTES,
    'what its run still writes never waits for a thread that is gone')
  const next = thread.open('claude', {}, () => false)!
  next.sink.write(CALL_LINES)
  t.equal(commandsIn(await next.end()), 1, 'a new thread reads the next run')
})

t.test('closed with the service: what it was reading ends without steps, and no run opens on it', async (t) => {
  const thread = newThread(t)
  const open = thread.open('claude', {}, () => false)!
  open.sink.write(CALL_LINES.subarray(0, 10))
  await thread.close()
  t.equal(await open.end(), null)
  t.equal(thread.open('claude', {}, () => false), null)
})

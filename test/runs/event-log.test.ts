import t from 'tap'
import { parseEventId, RunEventLog, withGaps, type StoredEvent } from '#src/runs/event-log.js'
import { follow, logSource } from '#src/runs/follow.js'
import type { EventsChoice, RunResult } from '#src/schemas/run.js'
import type { Step } from '#src/schemas/steps.js'
import type { RunEvent } from '#src/schemas/events.js'
import { completeUtf8Length, OutputEvents } from '#src/runs/output-events.js'

/** The events inside SSE frames, as a follower parses them. */
const decode = (frames: Buffer[]): RunEvent[] =>
  frames.map((frame) => JSON.parse(/^data: (.*)$/m.exec(frame.toString())![1]!) as RunEvent)
const framesOf = (events: StoredEvent[], position = 0) => withGaps(events, position).frames
const outputs = (frames: Buffer[]) =>
  decode(frames).filter((event) => event.type === 'output').map((event) => (event as { data: string }).data)
const gapOf = (frames: Buffer[]) =>
  (decode(frames).find((event) => event.type === 'gap') as { omitted_bytes: number } | undefined)?.omitted_bytes

/** Feeds the log as the registry does: raw chunks through OutputEvents. */
function write(log: RunEventLog, output: OutputEvents, chunks: string[]): void {
  for (const chunk of chunks) {
    const event = output.next(Buffer.from(chunk))
    if (event !== null) log.appendOutput(event)
  }
}

t.test('within the limit every event is kept; an id is where its output ends, so resuming is exact', async (t) => {
  const log = new RunEventLog(1000)
  const output = new OutputEvents()
  write(log, output, ['a', 'bb', 'ccc'])
  t.same(outputs(framesOf(log.after(0))), ['a', 'bb', 'ccc'])
  t.same(log.after(0).map((event) => event.id), [1, 3, 6])
  t.same(outputs(framesOf(log.after(3), 3)), ['ccc'])
  t.match(log.after(0)[0]!.frame.toString(), /^id: 1\nevent: output\ndata: \{.*\}\n\n$/, 'an SSE frame, with its id')
  t.same(log.after(6), [])
  t.notOk(log.ended)
  log.close(output.closing({ tool: 'crush_run' } as RunResult))
  t.ok(log.ended)
  t.match(decode(framesOf(log.after(6), 6)), [{ type: 'result', id: 7 }], 'the result comes after every output id')
  t.equal(log.dropped(), undefined, 'nothing dropped')
})

t.test('many small events past the limit: head and tail kept by their frames\' bytes, a gap between, ' +
  'memory compacted', async (t) => {
  const limit = 20_000
  const log = new RunEventLog(limit)
  const output = new OutputEvents()
  let calls = 0
  const unsubscribe = log.subscribe(() => calls++)
  write(log, output, Array.from({ length: 30_000 }, () => 'x'))
  t.equal(calls, 30_000, 'subscribers hear each event')
  unsubscribe()
  const kept = log.after(0)
  const frameBytes = kept.reduce((sum, event) => sum + event.frame.length, 0)
  const oneFrame = kept[0]!.frame.length
  // 30,000 one-byte writes once kept 29,061 events: bounded by output bytes, each costing a frame of some sixty.
  t.ok(
    frameBytes <= limit + oneFrame,
    `${String(kept.length)} events kept, ${String(frameBytes)} bytes of frames: within the limit`
  )
  const head = kept.findIndex((event, index) => event.id !== index + 1)
  const headBytes = kept.slice(0, head).reduce((sum, event) => sum + event.frame.length, 0)
  t.ok(
    headBytes >= limit / 2 && headBytes < limit / 2 + oneFrame + 10,
    `the first half: the first ${String(head)} events, ${String(headBytes)} bytes of frames`
  )
  t.equal(kept.at(-1)!.id, 30_000, 'the latest half: up to the last')
  t.equal(gapOf(framesOf(kept)), 30_000 - kept.length, 'the gap counts what was dropped')
  t.same(log.dropped(), { after: head, before: kept[head]!.id }, 'the dropped ids lie between the head and the tail')
  const near = log.after(29_990)
  t.equal(outputs(framesOf(near, 29_990)).length, 10, 'resuming near the end needs no gap')
  t.equal(gapOf(framesOf(near, 29_990)), undefined)
  log.close(output.closing(null))
  t.ok(log.ended, 'a run that failed without a result still releases its followers')
  t.equal(log.after(30_000).length, 0)
})

t.test('the gap is exact for every follower, wherever it stopped reading, its last event dropped or not', async (t) => {
  const log = new RunEventLog(6000)
  const output = new OutputEvents()
  write(log, output, Array.from({ length: 11_500 }, () => 'x'))
  // One-byte events: the head ends at the id (and byte) where the first half of the frames ends.
  const headEnd = log.dropped()!.after
  const firstTail = log.after(headEnd)[0]!
  for (const readUpTo of [0, Math.floor(headEnd / 2), headEnd, headEnd + 20, 7000, firstTail.offset]) {
    const frames = framesOf(log.after(readUpTo), readUpTo)
    const expected = Math.max(0, firstTail.offset - Math.max(readUpTo, headEnd))
    t.equal(gapOf(frames) ?? 0, expected, `read up to ${readUpTo}: ${expected} bytes missed`)
  }
})

t.test('each event is encoded once, however many followers read it', async (t) => {
  const log = new RunEventLog(1 << 20)
  const output = new OutputEvents()
  write(log, output, Array.from({ length: 50 }, () => 'y'))
  log.close(output.closing({ tool: 'crush_run' } as RunResult))
  const first = framesOf(log.after(0))
  for (let follower = 0; follower < 200; follower++) {
    t.equal(framesOf(log.after(0))[7], first[7], 'the same bytes, not a copy')
  }
  t.equal(log.encodedEvents, 51)
})

t.test('a character split across chunks is never split across events, and ids count raw bytes', async (t) => {
  const euro = Buffer.from('€') // e2 82 ac
  const output = new OutputEvents()
  t.equal(output.next(euro.subarray(0, 1)), null, 'a lone lead byte waits for the rest')
  t.match(output.next(Buffer.concat([euro.subarray(1), Buffer.from('!')])), { offset: 0, id: 4, data: '€!' })
  t.match(output.next(Buffer.from([0x41, 0xf0, 0x9f])), { offset: 4, id: 5, data: 'A' })
  t.match(output.end(), { offset: 5, id: 7, data: '\ufffd' }, 'an unfinished character ends as U+FFFD')
  t.equal(output.totalBytes, 7)
  t.equal(output.end(), null)
  t.equal(completeUtf8Length(Buffer.from([0xff])), 1, 'a byte that starts nothing is left to the decoder')
  t.equal(completeUtf8Length(Buffer.from([0x61, 0xc3])), 1)
  t.equal(completeUtf8Length(Buffer.from('é')), 2)
  t.equal(completeUtf8Length(Buffer.from([0x80, 0x80, 0x80, 0x80, 0x80])), 5, 'continuation bytes alone are not held')
})

const message = (text: string): Step => ({ kind: 'message', text, truncated: false })
const labels = (events: StoredEvent[]) => events.map((event) => /^id: (.*)$/m.exec(event.frame.toString())![1])

t.test('steps sort after the output read before them: ids name the bytes and the rank, ' +
  'and resume exactly', async (t) => {
  const log = new RunEventLog(1 << 20)
  const output = new OutputEvents()
  log.appendStep(message('before any output'))
  write(log, output, ['ab'])
  log.appendStep(message('one'))
  log.appendStep(message('two'))
  write(log, output, ['c'])
  log.close(output.closing({ tool: 'claude_run' } as RunResult))
  const all = log.after(0)
  t.same(labels(all), ['0.1', '2', '2.1', '2.2', '3', '4'], 'SSE ids: an output’s end, a step’s output-before and rank')
  t.ok(
    all.every((event, index) => index === 0 || event.id > all[index - 1]!.id), 'the numbers they are kept by only grow'
  )
  t.same(
    decode(framesOf(all)).filter((event) => event.type === 'step').map((event) => (event as { id: string }).id),
    ['0.1', '2.1', '2.2'], 'the data carries the id too'
  )
  t.same(
    labels(log.after(parseEventId('2.1')!)), ['2.2', '3', '4'], 'resuming after a step: the next step, then the output'
  )
  t.same(labels(log.after(parseEventId('2')!)), ['2.1', '2.2', '3', '4'], 'after an output: its steps first')
  t.equal(gapOf(framesOf(log.after(parseEventId('2.2')!), 2)), undefined, 'a step carries no bytes: no gap')
})

t.test('Last-Event-ID: only the ids this log gives', async (t) => {
  t.equal(parseEventId('0'), 0)
  t.equal(parseEventId('17.3'), 17 + 3 / 4096)
  t.equal(parseEventId('17.9999'), 17 + 4095 / 4096, 'a rank past the last one is after every step there')
  for (const bad of ['', '-1', '1.', '.1', '1.2.3', '1e3', ' 1', '1234567890123456']) {
    t.equal(parseEventId(bad), undefined, JSON.stringify(bad))
  }
})

t.test('thousands of steps with no output between them: the log keeps the first 4095, ' +
  'never an id out of order', async (t) => {
  const log = new RunEventLog(1 << 30)
  for (let index = 0; index < 5000; index++) log.appendStep(message(String(index)))
  const kept = log.after(0)
  t.equal(kept.length, 4095)
  t.ok(kept.every((event) => event.id < 1), 'all before the first byte that follows')
})

t.test('steps past the limit are dropped like output: the store is told, even when no byte was dropped', async (t) => {
  const log = new RunEventLog(2000)
  for (let index = 0; index < 200; index++) log.appendStep(message('x'.repeat(50)))
  const dropped = log.dropped()
  t.ok(dropped !== undefined, 'a dropped range')
  const kept = log.after(0)
  t.ok(
    kept.some((event) => event.id <= dropped!.after) && kept.some((event) => event.id >= dropped!.before),
    'head and tail kept around it'
  )
  t.notOk(kept.some((event) => event.id > dropped!.after && event.id < dropped!.before), 'nothing kept inside it')
})

t.test('a follower chooses steps, output or both: the result ends every choice', async (t) => {
  const log = new RunEventLog(1 << 20)
  const output = new OutputEvents()
  write(log, output, ['ab'])
  log.appendStep(message('one'))
  write(log, output, ['c'])
  log.close(output.closing({ tool: 'claude_run' } as RunResult))
  const kinds = async (choice: EventsChoice, lastId = 0) => {
    const frames: Buffer[] = []
    for await (const batch of follow(logSource(log), lastId, choice, new AbortController().signal)) {
      frames.push(...batch)
    }
    return decode(frames).map((event) => event.type)
  }
  t.same(await kinds('both'), ['output', 'step', 'output', 'result'])
  t.same(await kinds('steps'), ['step', 'result'])
  t.same(await kinds('output'), ['output', 'output', 'result'])
  t.same(
    await kinds('steps', parseEventId('2.1')), ['result'], 'resumed after its last step: what follows, still chosen'
  )
})

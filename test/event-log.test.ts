import t from 'tap'
import { RunEventLog, type LoggedFrame } from '../src/runs/event-log.js'
import type { RunResult } from '../src/schemas/run.js'
import type { RunEvent } from '../src/streams/events.js'

/** The events inside SSE frames, as a follower parses them. */
const decode = (frames: LoggedFrame[]): RunEvent[] =>
  frames.map(({ frame }) => JSON.parse(/^data: (.*)$/m.exec(frame.toString())![1]!) as RunEvent)
const outputs = (frames: LoggedFrame[]) => decode(frames).filter((event) => event.type === 'output').map((event) => (event as { data: string }).data)
const gapOf = (frames: LoggedFrame[]) => (decode(frames).find((event) => event.type === 'gap') as { omitted_bytes: number } | undefined)?.omitted_bytes

t.test('within the limit every event is kept and ids resume exactly', async (t) => {
  const log = new RunEventLog(1000)
  let offset = 0
  for (const data of ['a', 'bb', 'ccc']) {
    log.appendOutput({ type: 'output', offset, data }, data.length)
    offset += data.length
  }
  t.same(outputs(log.since(0)), ['a', 'bb', 'ccc'])
  t.same(outputs(log.since(2)), ['ccc'])
  t.match(log.since(0)[2], { id: 3, end: 6 }, 'each frame says where its output ends')
  t.match(log.since(0)[0]!.frame.toString(), /^id: 1\nevent: output\ndata: \{.*\}\n\n$/, 'an SSE frame, with its id')
  t.same(log.since(3), [])
  t.notOk(log.ended)
  log.end({ tool: 'crush_run' } as RunResult)
  t.ok(log.ended)
  t.match(decode(log.since(3)), [{ type: 'result', id: 4 }])
})

t.test('many small events past the limit: head and tail kept, a gap between, memory compacted', async (t) => {
  const log = new RunEventLog(200)
  let calls = 0
  const unsubscribe = log.subscribe(() => calls++)
  for (let index = 0; index < 5000; index++) log.appendOutput({ type: 'output', offset: index, data: 'x' }, 1)
  t.equal(calls, 5000, 'subscribers hear each event')
  unsubscribe()
  const frames = log.since(0)
  const kept = outputs(frames).length
  t.ok(kept <= 201, `${kept} events kept for 200 bytes`)
  t.equal(gapOf(frames), 5000 - kept, 'the gap counts what was dropped')
  const after = log.since(4990)
  t.same(outputs(after).length, 10, 'resuming near the end needs no gap')
  t.equal(gapOf(after), undefined)
  log.end(null)
  t.ok(log.ended, 'a run that failed without a result still releases its followers')
  t.equal(log.since(5000).length, 0)
})

t.test('the gap is exact for every follower, wherever it stopped reading', async (t) => {
  const log = new RunEventLog(200)
  for (let index = 0; index < 150; index++) log.appendOutput({ type: 'output', offset: index, data: 'x' }, 1)
  // A follower that read up to event 120 (offset 120) and then fell behind while the agent wrote 1000 more bytes.
  for (let index = 150; index < 1150; index++) log.appendOutput({ type: 'output', offset: index, data: 'x' }, 1)
  const frames = log.since(120, 120)
  const firstTail = frames.find((frame) => frame.id !== undefined && frame.id > 120)!
  t.equal(gapOf(frames), firstTail.end! - 1 - 120, 'exactly the bytes between what it had and what is still kept')
  t.equal(gapOf(log.since(0)), firstTail.end! - 1 - 100, 'from the head: the bytes after the head')
})

t.test('each event is encoded once, however many followers read it', async (t) => {
  const log = new RunEventLog(1 << 20)
  for (let index = 0; index < 50; index++) log.appendOutput({ type: 'output', offset: index, data: 'y' }, 1)
  log.end({ tool: 'crush_run' } as RunResult)
  const first = log.since(0)
  for (let follower = 0; follower < 200; follower++) {
    const frames = log.since(0)
    t.equal(frames[7]!.frame, first[7]!.frame, 'the same bytes, not a copy')
  }
  t.equal(log.encodedEvents, 51)
})

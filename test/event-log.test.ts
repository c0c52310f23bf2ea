import t from 'tap'
import { RunEventLog } from '../src/runs/event-log.js'
import type { RunResult } from '../src/schemas/run.js'
import type { RunEvent } from '../src/streams/events.js'

const outputs = (events: RunEvent[]) => events.filter((event) => event.type === 'output').map((event) => (event as { data: string }).data)

t.test('within the limit every event is kept and ids resume exactly', async (t) => {
  const log = new RunEventLog(1000)
  let offset = 0
  for (const data of ['a', 'bb', 'ccc']) {
    log.appendOutput({ type: 'output', offset, data }, data.length)
    offset += data.length
  }
  t.same(outputs(log.since(0)), ['a', 'bb', 'ccc'])
  t.same(outputs(log.since(2)), ['ccc'])
  t.same(log.since(3), [])
  t.notOk(log.ended)
  log.end({ tool: 'crush_run' } as RunResult)
  t.ok(log.ended)
  t.match(log.since(3), [{ type: 'result', id: 4 }])
})

t.test('many small events past the limit: head and tail kept, a gap between, memory compacted', async (t) => {
  const log = new RunEventLog(200)
  let calls = 0
  const unsubscribe = log.subscribe(() => calls++)
  for (let index = 0; index < 5000; index++) log.appendOutput({ type: 'output', offset: index, data: 'x' }, 1)
  t.equal(calls, 5000, 'subscribers hear each event')
  unsubscribe()
  const events = log.since(0)
  const kept = outputs(events).length
  t.ok(kept <= 201, `${kept} events kept for 200 bytes`)
  const gap = events.find((event) => event.type === 'gap') as { omitted_bytes: number }
  t.equal(gap.omitted_bytes, 5000 - kept, 'the gap counts what was dropped')
  const after = log.since(4990)
  t.same(outputs(after).length, 10, 'resuming near the end needs no gap')
  t.notOk(after.some((event) => event.type === 'gap'))
  log.end(null)
  t.ok(log.ended, 'a run that failed without a result still releases its followers')
  t.equal(log.since(5000).length, 0)
})

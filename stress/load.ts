import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { build, isAlive, listen, scenario, tempDir, until } from '../test/helpers/index.js'

const REQUESTS = 500
const LIMIT = 4

t.test(`${REQUESTS} concurrent requests on one tool: never more than ${LIMIT} agents, ` +
  'every request answered', async (t) => {
  const dir = tempDir(t)
  const app = await build(t, { MAX_CRUSH_AGENTS: String(LIMIT) })
  const base = await listen(t, app)
  const statuses = await Promise.all(
    Array.from({ length: REQUESTS }, async () => {
      const response = await fetch(`${base}/tools/crush_run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ task: scenario.record(dir, 200) })
      })
      await response.arrayBuffer()
      return response.status
    })
  )
  t.equal(statuses.length, REQUESTS, 'every request answered')
  t.same([...new Set(statuses)].sort(), [200, 429], 'only 200 and 429')
  const ran = statuses.filter((status) => status === 200).length
  t.ok(ran >= LIMIT, `${ran} runs went through`)

  // Intervals each agent recorded from inside: at no instant do more than LIMIT overlap.
  const pids = readdirSync(dir).filter((name) => name.endsWith('.start')).map((name) => name.slice(0, -'.start'.length))
  t.equal(pids.length, ran, 'one agent per 200')
  const events = pids.flatMap((pid) => [
    { at: BigInt(readFileSync(join(dir, `${pid}.start`), 'utf8')), delta: 1 },
    { at: BigInt(readFileSync(join(dir, `${pid}.end`), 'utf8')), delta: -1 }
  ])
  events.sort((a, b) => (a.at === b.at ? a.delta - b.delta : a.at < b.at ? -1 : 1))
  let running = 0
  let most = 0
  for (const event of events) {
    running += event.delta
    most = Math.max(most, running)
  }
  t.ok(most <= LIMIT, `at most ${most} agents ran at once`)
  t.equal(app.slots.inUse('crush_run'), 0, 'the slot count is back to 0')
  const survivors = await until(
    () => pids.filter((pid) => isAlive(Number(pid))), (alive) => alive.length === 0, 5000, 'agents to be gone'
  )
  t.same(survivors, [], 'no agent process survives')
})

import t from 'tap'
import Database from 'better-sqlite3'
import { once } from 'node:events'
import { join } from 'node:path'
import {
  createRun, getRun, isAlive, listRuns, readPidFile, scenario, settled, startServer, tempDir, waitFor, type Started
} from '../helpers/index.js'

// What survives a restart: finished runs with their results and kept events; runs in flight end as cancelled (the
// service stopped them on its way out) or lost (it was killed), with what they had written.

const eventsOf = async (base: string, id: string) => (await fetch(`${base}/runs/${id}/events`)).text()

/** Polls the store itself (another reader of the same file): the run's events have been saved. */
async function savedEvents(dataDir: string, id: string): Promise<void> {
  const db = new Database(join(dataDir, 'runs.sqlite'), { readonly: true })
  try {
    await waitFor(
      () => (db.prepare('SELECT count(*) AS n FROM events WHERE run = ?').get(id) as { n: number }).n >= 2, 10_000,
      'events saved'
    )
  } finally {
    db.close()
  }
}

async function stop(server: Started, signal: NodeJS.Signals): Promise<void> {
  const exited = once(server.child, 'exit')
  server.child.kill(signal)
  await exited
}

// Each test has its own services and data directory, and spends most of its time starting them: side by side.
t.jobs = 2

t.test('a restart keeps finished runs as they were; ' +
  'a run in flight at SIGTERM is cancelled with its output', async (t) => {
  const dataDir = tempDir(t)
  const pidFile = join(tempDir(t), 'agent.pid')
  const first = await startServer(t, { DATA_DIR: dataDir })
  const done = await createRun(first.base, { tool: 'crush_run', task: scenario.drip(3, 10) })
  const before = await settled(first.base, done.id)
  t.equal(before.status, 'succeeded')
  const eventsBefore = await eventsOf(first.base, done.id)
  const inFlight = await createRun(first.base, { tool: 'crush_run', task: scenario.drip(100000, 20, pidFile) })
  const agent = await readPidFile(pidFile)
  await savedEvents(dataDir, inFlight.id)
  await stop(first, 'SIGTERM')
  t.notOk(isAlive(agent), 'the agent stopped with the service')

  const second = await startServer(t, { DATA_DIR: dataDir })
  t.same(await getRun(second.base, done.id), before, 'the same state and result')
  t.equal(await eventsOf(second.base, done.id), eventsBefore, 'the same events, byte for byte')
  t.match(await getRun(second.base, inFlight.id), {
    status: 'cancelled', finished_at: String, result: { stop_reason: 'shutdown', ok: false }
  })
  const kept = await eventsOf(second.base, inFlight.id)
  t.match(
    kept, /event: output\ndata: \{"type":"output","id":\d+,"offset":0,"data":"tick 1\\n/, 'its output from the start'
  )
  t.match(kept, /event: result\n/, 'and its result')
  t.same((await listRuns(second.base)).map((run) => run.id), [inFlight.id, done.id], 'both listed, newest first')
})

t.test('a run in flight when the service is killed is lost after the restart, with what it had written; ' +
  'its agent is stopped', async (t) => {
  const dataDir = tempDir(t)
  const pidFile = join(tempDir(t), 'agent.pid')
  const first = await startServer(t, { DATA_DIR: dataDir })
  const { id } = await createRun(first.base, { tool: 'crush_run', task: scenario.drip(100000, 20, pidFile) })
  const agent = await readPidFile(pidFile)
  await savedEvents(dataDir, id)
  await stop(first, 'SIGKILL')

  const second = await startServer(t, { DATA_DIR: dataDir })
  t.notOk(isAlive(agent), 'what the killed service left running was stopped at start')
  t.match(await getRun(second.base, id), { id, status: 'lost', finished_at: String, result: null })
  const kept = await eventsOf(second.base, id)
  t.match(kept, /"data":"tick 1\\n/, 'the output it had saved')
  t.notMatch(kept, /event: result/, 'no result: it never ended')
  t.ok(
    second.logs.some((entry) => /1 run\(s\) of a previous life ended with it: now lost/.test(String(entry['msg']))),
    'the start says so'
  )
})

import t, { type Test } from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import { queueName, RunDispatch, type RunOutcome, type RunPlace } from '#src/fleet/run-jobs.js'
import { tempDir, waitFor } from '../helpers/index.js'
import { fromRoot } from '../helpers/root.js'
import { NO_REDIS, startRedis } from '../helpers/redis.js'

// Runs as BullMQ jobs (issue 40), on a real redis-server: an API replica's RunDispatch hands runs over, workers in
// processes of their own (test/fleet/worker-process.ts) take them, each at most its own number at once.

const WORKER = fromRoot('dist-test/test/fleet/worker-process.js')
/** Short, so that a killed worker's runs are found lost quickly; long enough for a loaded machine to renew it. */
const LOCK_MS = 2000

interface LogLine {
  worker: string
  event: 'ready' | 'start' | 'end' | 'closed'
  run?: string
  tool?: string
  at: number
}

interface Fleet {
  /** The fleet's own Redis. */
  url: string
  dispatch: RunDispatch
  /** How many times a worker took the run: one that gave it back for want of room took it once more. */
  takes: (tool: string, place: RunPlace, runId: string) => Promise<number>
  /** A worker process, ready to take runs (on its host only, unless told). */
  worker: (name: string, concurrency: Record<string, number>, places?: RunPlace[]) => Promise<ChildProcess>
  lines: () => LogLine[]
}

let prefixes = 0

async function fleet(t: Test, tools = ['crush_run']): Promise<Fleet> {
  const { url } = await startRedis(t)
  const options = { url, prefix: `fleet-${process.pid}-${++prefixes}`, lockDurationMs: LOCK_MS }
  const log = join(tempDir(t), 'fleet.log')
  const lines = (): LogLine[] => existsSync(log)
    ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as LogLine)
    : []
  const dispatch = new RunDispatch(options, tools)
  t.teardown(() => dispatch.close())
  await dispatch.ready()
  const worker = async (
    name: string, concurrency: Record<string, number>, places: RunPlace[] = ['host']
  ): Promise<ChildProcess> => {
    const child = spawn(process.execPath, [
      WORKER, url, options.prefix, name, JSON.stringify(concurrency), String(LOCK_MS), JSON.stringify(places)
    ], { env: { ...process.env, FLEET_LOG: log }, stdio: ['ignore', 'inherit', 'inherit'] })
    t.teardown(() => { child.kill('SIGKILL') })
    const ready = (): boolean => lines().some((line) => line.worker === name && line.event === 'ready')
    await waitFor(ready, 15_000, `${name} ready`)
    return child
  }
  const takes = async (tool: string, place: RunPlace, runId: string): Promise<number> => {
    const connection = new Redis(url)
    const queue = new Queue(queueName(tool, place), { connection, prefix: options.prefix })
    try {
      return (await queue.getJob(runId))!.attemptsStarted
    } finally {
      await queue.close()
      connection.disconnect()
    }
  }
  return { url, dispatch, worker, lines, takes }
}

/** The most runs that were running at once, overall and on each worker, from the starts and ends logged. */
function mostAtOnce(lines: LogLine[]): { overall: number; byWorker: Record<string, number> } {
  const moves = lines.filter((line) => line.event === 'start' || line.event === 'end')
    .sort((a, b) => a.at - b.at || (a.event === 'end' ? -1 : 1))
  let now = 0
  let overall = 0
  const running: Record<string, number> = {}
  const byWorker: Record<string, number> = {}
  for (const { worker, event } of moves) {
    const step = event === 'start' ? 1 : -1
    now += step
    running[worker] = (running[worker] ?? 0) + step
    overall = Math.max(overall, now)
    byWorker[worker] = Math.max(byWorker[worker] ?? 0, running[worker])
  }
  return { overall, byWorker }
}

t.test('runs as jobs', { skip: NO_REDIS }, async (t) => {
  t.test('three workers, each one run at a time: nine runs each run once, by whichever has room, three at once at ' +
    'most, one on each', async (t) => {
    const f = await fleet(t)
    await Promise.all(['w1', 'w2', 'w3'].map((name) => f.worker(name, { crush_run: 1 })))
    const runs = Array.from({ length: 9 }, (_, i) => `run-${i}`)
    const handed = await Promise.all(runs.map((id) => f.dispatch.handOver('crush_run', id, { ms: 300 })))
    const outcomes = await Promise.all(handed.map((run) => run.ended))
    const lines = f.lines()
    const starts = lines.filter((line) => line.event === 'start')
    t.same(starts.map((line) => line.run).sort(), runs.sort(), 'each run started once')
    t.same(outcomes, runs.map((run) => ({
      end: 'completed', value: { ranBy: starts.find((line) => line.run === run)!.worker }
    })), 'each outcome is what its worker returned')
    const most = mostAtOnce(lines)
    t.same(most.byWorker, { w1: 1, w2: 1, w3: 1 }, 'never more than its own limit on one worker, and each took some')
    t.equal(most.overall, 3, 'the three at once')
  })

  t.test('a worker takes only the tools it runs, up to its limit for each', async (t) => {
    const f = await fleet(t, ['crush_run', 'claude_run'])
    await f.worker('crush-only', { crush_run: 2 })
    const claude = await f.dispatch.handOver('claude_run', 'c1', { ms: 10 })
    const crush = await Promise.all(['k1', 'k2', 'k3', 'k4'].map((id) =>
      f.dispatch.handOver('crush_run', id, { ms: 200 })))
    await Promise.all(crush.map((run) => run.ended))
    t.equal(mostAtOnce(f.lines()).byWorker['crush-only'], 2, 'two crush runs at once, not four')
    t.notOk(f.lines().some((line) => line.run === 'c1'), 'the claude run was not its to take')
    await f.worker('claude-too', { claude_run: 1 })
    t.same(await claude.ended, { end: 'completed', value: { ranBy: 'claude-too' } }, 'a worker that runs it took it')
  })

  t.test('a WSL run is offered only to a worker that takes them (a Windows one), which takes host runs too',
    async (t) => {
      const f = await fleet(t)
      await f.worker('linux', { crush_run: 1 })
      const inWsl = await f.dispatch.handOver('crush_run', 'wsl-1', { ms: 10 }, 'wsl')
      const onHost = await f.dispatch.handOver('crush_run', 'host-1', { ms: 10 })
      t.same(await onHost.ended, { end: 'completed', value: { ranBy: 'linux' } }, 'the Linux worker takes host runs')
      t.equal(await f.dispatch.waiting('crush_run'), 1, 'the WSL run still waits, counted with its tool')
      await f.worker('windows', { crush_run: 1 }, ['host', 'wsl'])
      t.same(await inWsl.ended, { end: 'completed', value: { ranBy: 'windows' } }, 'a Windows worker took it')
      t.notOk(f.lines().some((line) => line.run === 'wsl-1' && line.worker === 'linux'), 'never the Linux worker')
    })

  t.test('a worker taking host and WSL runs holds its limit across both', async (t) => {
    const f = await fleet(t)
    await f.worker('windows', { crush_run: 2 }, ['host', 'wsl'])
    const places: RunPlace[] = ['host', 'wsl']
    const runs = Array.from({ length: 10 }, (_, i) => ({ id: `run-${i}`, place: places[i % 2] }))
    const handed = await Promise.all(runs.map(({ id, place }) =>
      f.dispatch.handOver('crush_run', id, { ms: 150 }, place)))
    const outcomes = await Promise.all(handed.map((run) => run.ended))
    t.same(outcomes, runs.map(() => ({ end: 'completed', value: { ranBy: 'windows' } })), 'each ran')
    t.equal(mostAtOnce(f.lines()).byWorker['windows'], 2, 'two at once, never more, wherever they went')
  })

  t.test('a worker full with runs of one place takes none of another meanwhile: another worker with room does',
    async (t) => {
      const f = await fleet(t)
      await f.worker('windows', { crush_run: 1 }, ['host', 'wsl'])
      // Held until the host runs have ended, however slowly the other worker starts.
      const gate = join(tempDir(t), 'gate')
      const inWsl = await f.dispatch.handOver('crush_run', 'wsl-long', { ms: 0, until: gate }, 'wsl')
      await waitFor(() => f.lines().some((line) => line.run === 'wsl-long'), 15_000, 'the WSL run to start')
      const onHost = await Promise.all(['h1', 'h2', 'h3'].map((id) => f.dispatch.handOver('crush_run', id, { ms: 10 })))
      await f.worker('linux', { crush_run: 1 })
      t.same(await Promise.all(onHost.map((run) => run.ended)),
        onHost.map(() => ({ end: 'completed', value: { ranBy: 'linux' } })), 'the host runs went where there was room')
      writeFileSync(gate, '')
      t.same(await inWsl.ended, { end: 'completed', value: { ranBy: 'windows' } })
      const takes = await Promise.all(['h1', 'h2', 'h3'].map((id) => f.takes('crush_run', 'host', id)))
      t.ok(takes.every((count) => count <= 2),
        `the full worker stopped taking them: at most one take given back each (${takes.join(', ')})`)
    })

  t.test('a run withdrawn before any worker took it never starts; one that failed says why', async (t) => {
    const f = await fleet(t)
    const waiting = await f.dispatch.handOver('crush_run', 'queued-1', { ms: 10 })
    t.equal(await waiting.withdraw(), true, 'taken back')
    t.same(await waiting.ended, { end: 'failed', reason: 'withdrawn' })
    const failing = await f.dispatch.handOver('crush_run', 'failing-1', { ms: 10, fail: 'no such cwd' })
    const after = await f.dispatch.handOver('crush_run', 'after-1', { ms: 10 })
    await f.worker('w1', { crush_run: 1 })
    t.same(await failing.ended, { end: 'failed', reason: 'no such cwd' })
    t.same((await after.ended as Extract<RunOutcome, { end: 'completed' }>).end, 'completed')
    t.notOk(f.lines().some((line) => line.run === 'queued-1'), 'no worker ever started the withdrawn run')
    t.equal(f.lines().filter((line) => line.run === 'failing-1' && line.event === 'start').length, 1,
      'a failed run is not tried again: an agent is not idempotent')
    const running = await f.dispatch.handOver('crush_run', 'running-1', { ms: 500 })
    await running.taken
    t.equal(await running.withdraw(), false, 'a run a worker took is not taken back')
    t.same((await running.ended as Extract<RunOutcome, { end: 'completed' }>).end, 'completed')
    t.equal(await running.withdraw(), false, 'nor one it has ended (its end unheard yet where it was asked)')
  })

  t.test('a run Redis lost (restarted without its data) before any worker took it is taken back all the same',
    async (t) => {
      const f = await fleet(t)
      const forgotten = await f.dispatch.handOver('crush_run', 'forgotten-1', { ms: 10 })
      const redis = new Redis(f.url)
      await redis.flushall()
      redis.disconnect()
      t.equal(await forgotten.withdraw(), true, 'nothing will run it: its caller is not left waiting')
      t.same(await forgotten.ended, { end: 'failed', reason: 'withdrawn' })
    })

  t.test('a worker killed mid-run: its run is lost, and no other worker ever runs it', async (t) => {
    const f = await fleet(t)
    const doomed = await f.worker('doomed', { crush_run: 1 })
    const run = await f.dispatch.handOver('crush_run', 'lost-1', { ms: 60_000 })
    await waitFor(() => f.lines().some((line) => line.run === 'lost-1'), 15_000, 'its worker to run it')
    const gone = once(doomed, 'exit')
    doomed.kill('SIGKILL')
    await gone
    await f.worker('survivor', { crush_run: 1 })
    t.same(await run.ended, { end: 'lost' }, 'lost, once its hold ran out')
    // The survivor is idle now: a run handed over after it ran, and the lost one was never given to it.
    const next = await f.dispatch.handOver('crush_run', 'next-1', { ms: 10 })
    t.same(await next.ended, { end: 'completed', value: { ranBy: 'survivor' } })
    t.same(f.lines().filter((line) => line.run === 'lost-1' && line.event === 'start').map((line) => line.worker),
      ['doomed'], 'started once, by the worker that died')
  })

  t.test('a worker stopping takes no new run and ends the ones it took', async (t) => {
    const f = await fleet(t)
    const leaving = await f.worker('leaving', { crush_run: 1 })
    const first = await f.dispatch.handOver('crush_run', 'first', { ms: 400 })
    await first.taken
    const second = await f.dispatch.handOver('crush_run', 'second', { ms: 10 })
    leaving.kill('SIGTERM')
    t.same(await first.ended, { end: 'completed', value: { ranBy: 'leaving' } }, 'its run ended, not lost')
    const closed = (): boolean => f.lines().some((line) => line.worker === 'leaving' && line.event === 'closed')
    await waitFor(closed, 15_000, 'the worker to close')
    await f.worker('next', { crush_run: 1 })
    t.same(await second.ended, { end: 'completed', value: { ranBy: 'next' } }, 'the waiting run went to another')
  })
})

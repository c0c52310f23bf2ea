import t, { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import { Run, type RunKind } from '#src/runs/run.js'
import { IllegalTransition, RUN_PHASES, TRANSITIONS, isEnd, nextPhase, type RunPhase } from '#src/runs/run-phase.js'
import {
  build, buildLogged, cancelRun, createRun, heldAgent, listRuns, post, readPidFile, refused, runTool, scenario,
  settled, until
} from '../helpers/index.js'
import { fromRoot } from '../helpers/root.js'

t.test('the table: every phase reachable from opened, every path reaches an end, an end is final', async (t) => {
  const reachable = new Set<RunPhase>(['opened'])
  for (const phase of reachable) for (const next of TRANSITIONS[phase]) reachable.add(next)
  t.same([...reachable].sort(), [...RUN_PHASES].sort(), 'no phase is unreachable')
  const reachesEnd = (phase: RunPhase, seen = new Set<RunPhase>()): boolean =>
    isEnd(phase) || TRANSITIONS[phase].some((next) => !seen.has(next) && reachesEnd(next, new Set([...seen, phase])))
  for (const phase of RUN_PHASES) t.ok(reachesEnd(phase), `${phase} leads to an end`)
  t.same(RUN_PHASES.filter(isEnd), ['finished', 'refused', 'failed', 'handed_over'])
})

t.test('the moves nextPhase allows are exactly the ones docs/architecture.md draws', async (t) => {
  // Rows `| \`from\` | \`to\` | who | when |`: the table a reader trusts, held to the code.
  const drawn = new Set([
    ...readFileSync(fromRoot('docs/architecture.md'), 'utf8').matchAll(/^\| `([a-z_]+)` \| `([a-z_]+)` \|/gm)
  ]
    .map(([, from, to]) => `${from} → ${to}`))
  t.ok(drawn.size > 0, 'the table is there')
  const allowed = new Set<string>()
  for (const from of RUN_PHASES) {
    for (const to of RUN_PHASES) {
      try {
        if (nextPhase(from, to) === to) allowed.add(`${from} → ${to}`)
      } catch (error) {
        t.type(error, IllegalTransition, `${from} → ${to}: refused as illegal`)
      }
    }
  }
  t.same([...allowed].sort(), [...drawn].sort())
})

const opening = (kind: RunKind) =>
  ({ kind, tool: 'crush_run' as const, caller: 'anonymous', params: { task: 'x', timeout: 60 } })

t.test('a Run moves only as the table allows, tells each phase once and each event in order, ' +
  'settles at its end', async (t) => {
  const run = new Run(opening('sync'))
  const seen: string[] = []
  run.on('phase', (from) => seen.push(`${from} → ${run.phase}`))
  run.on('spawn', (pid) => seen.push(`spawn ${pid}`))
  run.on('output', (chunk) => seen.push(`output ${chunk.toString()}`))
  run.on('stdout', (chunk) => seen.push(`stdout ${chunk.toString()}`))
  run.on('stopping', (reason) => seen.push(`stopping ${reason}`))
  let ended = false
  void run.ended().then(() => { ended = true })
  run.advance('placed')
  t.throws(() => run.spawned(1), IllegalTransition, 'no agent without a slot')
  run.advance('waiting_for_slot')
  run.advance('starting')
  run.spawned(42)
  t.ok(run.listedLive, 'listed once its agent exists')
  t.throws(() => run.advance('placed'), IllegalTransition, 'never back')
  run.output(Buffer.from('a'))
  run.stdout(Buffer.from('a'))
  run.stopping('cancelled')
  run.finish({ tool: 'crush_run', ok: false, stop_reason: 'cancelled' } as never)
  await run.ended()
  t.ok(ended)
  t.notOk(run.listedLive, 'not listed once ended')
  t.equal(run.snapshot().status, 'cancelled', 'its record reads its end')
  t.throws(() => run.abort(new Error('late')), IllegalTransition, 'an end is final')
  t.same(seen, [
    'opened → placed', 'placed → waiting_for_slot', 'waiting_for_slot → starting', 'starting → running', 'spawn 42',
    'output a', 'stdout a', 'running → stopping', 'stopping cancelled', 'stopping → finished'
  ])
})

t.test('a run stopped before its agent goes no further: its next step refuses, with its stopper\'s code', async (t) => {
  for (const [reason, code] of [['shutdown', 'SHUTTING_DOWN'], ['client_gone', 'CLIENT_CLOSED_REQUEST']] as const) {
    const run = new Run(opening('stream'))
    run.advance('placed')
    run.stop(reason)
    const refusal = new Error(code)
    t.throws(() => run.advance('waiting_for_slot'), { code }, `${reason}: ${code}`)
    t.equal(run.phase, 'placed', 'the refused step was not taken')
    run.abort(refusal)
    t.equal(run.phase, 'refused')
    t.equal(run.refusal, refusal, 'what refused it is kept, for whoever launched it')
  }
  const started = new Run(opening('async'))
  for (const step of ['placed', 'waiting_for_slot', 'starting'] as const) started.advance(step)
  started.spawned(7)
  started.abort(new Error('lost'))
  t.equal(started.phase, 'failed', 'an error after the agent started: failed, not refused')
  t.equal(started.refusal, undefined, 'a failure is no refusal')
  t.equal(started.snapshot().status, 'failed')
  t.notOk(started.listedLive, 'an async run is never listed from memory')
})

t.test('its signal tells the first stop, whether it was watched before the stop or only after', async (t) => {
  const watchedBefore = new Run(opening('sync'))
  const { signal } = watchedBefore
  t.notOk(signal.aborted || watchedBefore.stopped, 'nothing stopped it yet')
  watchedBefore.stop('cancelled')
  watchedBefore.stop('shutdown')
  t.ok(signal.aborted, 'the signal watched before the stop is aborted by it')
  t.equal(signal.reason, 'cancelled', 'the first reason wins')
  const watchedAfter = new Run(opening('sync'))
  watchedAfter.stop('client_gone')
  watchedAfter.stop('timeout')
  t.ok(watchedAfter.stopped)
  t.equal(watchedAfter.stopReason, 'client_gone')
  t.ok(watchedAfter.signal.aborted, 'a signal first asked for after the stop is born aborted')
  t.equal(watchedAfter.signal.reason, 'client_gone', 'with the first reason')
})
/** The service with its debug log kept: each phase a run enters is one `run phase` line. */
async function withPhaseLog(t: Test, overrides: Record<string, string> = {}) {
  const { app, lines } = await buildLogged(t, { LOG_LEVEL: 'debug', ...overrides })
  /** Each run's walk, in the order the runs were opened. */
  const walks = (): Map<string, RunPhase[]> => {
    const byRun = new Map<string, RunPhase[]>()
    const parsed = lines.flatMap((chunk) => chunk.split('\n').filter(Boolean))
      .map((line) => JSON.parse(line) as { msg: string; run?: string; from?: RunPhase; phase?: RunPhase })
    for (const line of parsed.filter(({ msg }) => msg === 'run phase')) {
      const walk = byRun.get(line.run!) ?? [line.from!]
      byRun.set(line.run!, [...walk, line.phase!])
    }
    return byRun
  }
  const walkOf = (id: string): RunPhase[] | undefined => walks().get(id)
  const lastWalk = (): RunPhase[] | undefined => [...walks().values()].at(-1)
  return { app, walkOf, lastWalk }
}

const WHOLE_WALK: RunPhase[] = ['opened', 'placed', 'waiting_for_slot', 'starting', 'running']

t.test('through the service: each way a run ends is its walk through the phases, in the log', async (t) => {
  const { app, walkOf, lastWalk } = await withPhaseLog(t, { MAX_CRUSH_AGENTS: '1' })
  const ended = await runTool(app, 'crush_run', { task: 'hello' })
  t.same(lastWalk(), [...WHOLE_WALK, 'finished'], 'a run that ends on its own')
  t.equal(ended.stop_reason, null)

  const badCwd = await refused(app, 'crush_run', { task: 'x', cwd: '/nowhere/at/all' })
  t.equal(badCwd.body.code, 'CWD_NOT_FOUND')
  t.same(lastWalk(), ['opened', 'refused'], 'a place that does not exist: refused before anything')

  const held = heldAgent(t)
  const holding = runTool(app, 'crush_run', { task: held.task })
  await readPidFile(held.pidFile)
  t.equal((await refused(app, 'crush_run', { task: 'one too many' })).status, 429)
  t.same(lastWalk(), ['opened', 'placed', 'waiting_for_slot', 'refused'], 'no slot: refused while waiting for one')
  const [live] = await listRuns(app)
  t.match(live, { status: 'running', kind: 'sync' }, 'the held run is listed: its agent exists')
  await cancelRun(app, live!.id)
  const cancelled = await holding
  t.equal(cancelled.stop_reason, 'cancelled')
  t.same(walkOf(live!.id), [...WHOLE_WALK, 'stopping', 'finished'], 'DELETE: stopping, then finished')

  const timedOut = await runTool(app, 'crush_run', { task: scenario.sleep(30_000), timeout: 1 })
  t.equal(timedOut.stop_reason, 'timeout')
  t.same(lastWalk(), [...WHOLE_WALK, 'stopping', 'finished'], 'the deadline is a stop like any other')
})

t.test('an async run is stored from its phases: running when its agent runs, its end when it finishes', async (t) => {
  const { app, walkOf } = await withPhaseLog(t)
  const held = heldAgent(t)
  const run = await createRun(app, { tool: 'crush_run', task: held.task })
  t.same(walkOf(run.id), WHOLE_WALK, 'answered once running (and stored)')
  held.release()
  t.match(await settled(app, run.id), { status: 'succeeded', result: { output: /released/ } })
  t.same(walkOf(run.id), [...WHOLE_WALK, 'finished'])
})

t.test('/metrics shows where the runs are: one running while its agent runs, none once it ends', async (t) => {
  const app = await build(t)
  const runsIn = async (phase: RunPhase): Promise<number> => {
    const text = (await app.inject({ method: 'GET', url: '/metrics' })).body
    return Number(new RegExp(`^agent_runner_runs\\{phase="${phase}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN)
  }
  t.equal(await runsIn('running'), 0)
  const held = heldAgent(t)
  const pending = post(app, 'crush_run', { task: held.task })
  t.equal(await until(() => runsIn('running'), (count) => count === 1, 5000, 'a running run'), 1)
  t.equal(await runsIn('waiting_for_slot'), 0)
  held.release()
  await pending
  t.equal(await runsIn('running'), 0)
})

import t from 'tap'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { processesOfUid } from '#src/process/uid-sweep.js'
import {
  build, cancelRun, createRun, crossableDataDir, getRun, runTool, scenario, sharedDir, until, waitFor
} from '../helpers/index.js'
import { asRoot } from '../helpers/users.js'

// Where no cgroup bounds a run (AGENT_LIMITS=rlimits here, a host without cgroups elsewhere), a token's own user gets
// RLIMIT_NPROC: a fork bomb in alice's run cannot take more than that many processes, while bob's run and /healthz go
// on (issue 36, item 4).

const ALICE = { authorization: 'Bearer secret-a' }
const BOB = { authorization: 'Bearer secret-b' }
const LIMIT = 64
const namespaceHere = ['/usr/bin/unshare', '/usr/bin/tini'].every((tool) => existsSync(tool))
const skip = !asRoot ? 'AGENT_USERS needs root' : !existsSync('/usr/bin/prlimit') && 'needs util-linux prlimit'

const modes = [
  { mode: 'process-group', uids: '61600-61609' },
  ...(namespaceHere ? [{ mode: 'pid-namespace', uids: '61610-61619' }] : [])
]

for (const { mode, uids } of modes) {
  t.test(`${mode}: a fork bomb holds at most AGENT_MAX_PROCESSES of its token’s user, ` +
    'while another token’s run and /healthz answer', { skip }, async (t) => {
    const app = await build(t, {
      API_TOKENS: 'alice:secret-a,bob:secret-b',
      AGENT_USERS: uids,
      AGENT_CONTAINMENT: mode,
      AGENT_LIMITS: 'rlimits',
      AGENT_MAX_PROCESSES: String(LIMIT),
      MAX_CRUSH_AGENTS: '4',
      DATA_DIR: crossableDataDir(t)
    })
    const readiness = (await app.inject({ method: 'GET', url: '/readyz', headers: ALICE })).json()
    t.match(readiness.containment, {
      limits: new RegExp(`^${LIMIT} processes per token \\(RLIMIT_NPROC of its own user\\).*AGENT_LIMITS=rlimits`)
    })
    const alice = JSON.parse(
      (await runTool(app, 'crush_run', { task: scenario.whoami() }, ALICE)).output.split('\n')[0]!
    ) as { uid: number }
    const dir = sharedDir(t)
    // 100 sleepers asked for by a Node script (a shell dies at its first refused fork): those past the limit are
    // refused (EAGAIN), and the count holds still.
    const sleepers = join(dir, 'sleepers.mjs')
    const started = join(dir, 'started')
    writeFileSync(sleepers, [
      "import { spawn } from 'node:child_process'",
      "import { writeFileSync } from 'node:fs'",
      'const children = Array.from({ length: 100 }, () => ' +
        "spawn('sleep', ['30'], { stdio: 'ignore' }).on('error', () => {}))",
      'writeFileSync(process.argv[2], String(children.filter((child) => child.pid !== undefined).length))',
      'setInterval(() => {}, 1000)'
    ].join('\n'), { mode: 0o644 })
    // Both of alice's runs last until the test stops them: what is counted is counted while they run, however slow.
    const crowd = await createRun(app, { tool: 'crush_run', task: scenario.shell('node', sleepers, started) }, ALICE)
    const spawned = Number(
      await until(
        () => (existsSync(started) ? readFileSync(started, 'utf8') : ''), Boolean, 30_000,
        'the sleepers to be asked for'
      )
    )
    t.ok(spawned < 100, `the limit refused some of the 100 sleepers (${spawned} started)`)
    const held = (await processesOfUid(alice.uid)).length
    t.ok(held <= LIMIT, `never more than ${LIMIT} processes of alice’s user (${held})`)
    t.ok(held > LIMIT / 2, `and they did start up to it (${held} processes)`)
    t.match(
      await runTool(app, 'crush_run', { task: 'hello' }, BOB), { ok: true }, 'bob’s user is not counted with alice’s'
    )
    t.match(await cancelRun(app, crowd.id, ALICE), { status: 'cancelled', result: { stop_reason: 'cancelled' } },
      'the sleepers’ run stopped')

    const bomb = await createRun(app, { tool: 'crush_run', task: scenario.forkBomb(dir) }, ALICE)
    await waitFor(() => existsSync(join(dir, 'bomb')), 30_000, 'the bomb to go off')
    const other = runTool(app, 'crush_run', { task: scenario.sleep(1) }, BOB)
    t.match(await other, { ok: true, output: /slept 1/ }, 'bob’s run ran as usual')
    t.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, '/healthz answered')
    t.equal((await getRun(app, bomb.id, ALICE)).status, 'running', 'beside the bomb, still going off')
    t.match(await cancelRun(app, bomb.id, ALICE), { status: 'cancelled', result: { stop_reason: 'cancelled' } },
      'the bomb stopped')
    t.same(await processesOfUid(alice.uid), [], 'and nothing of alice’s user is left')
  })
}

t.test('AGENT_USER shared with others, or no AGENT_USERS: no per-uid limit, ' +
  'and /readyz says none', { skip }, async (t) => {
  const app = await build(t, { AGENT_LIMITS: 'rlimits' })
  t.match((await app.inject({ method: 'GET', url: '/readyz' })).json().containment, {
    limits: 'none: AGENT_LIMITS=rlimits'
  })
  t.match(await runTool(app, 'crush_run', { task: 'hello' }), { ok: true })
})

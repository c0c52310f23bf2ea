import t from 'tap'
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, writeFileSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { RunLedger } from '#src/process/ledger.js'
import { processStartTime } from '#src/process/posix-signals.js'
import { RUN_MARK_VARIABLE, runMark, serviceLife } from '#src/process/run-marks.js'
import { build, call, isAlive, post, processesLeft, readPidFile, scenario, tempDir } from '../helpers/index.js'
import { asRoot } from '../helpers/users.js'

/** Fills a file system until it refuses another byte. */
function fill(dir: string): void {
  const fd = openSync(join(dir, 'filler'), 'w')
  const block = Buffer.alloc(4096)
  try {
    for (;;) writeSync(fd, block)
  } catch {
    // ENOSPC: full
  } finally {
    closeSync(fd)
  }
}

t.test('a run that cannot be recorded (DATA_DIR full) is killed at once: a 503 RUN_NOT_RECORDED, no agent, ' +
  'its slot back', { skip: !asRoot && 'needs root (mount)' }, async (t) => {
  const dataDir = join(tempDir(t), 'data')
  mkdirSync(dataDir)
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', dataDir])
  t.teardown(() => execFileSync('umount', ['-l', dataDir]))
  const app = await build(t, { DATA_DIR: dataDir, RUNS_STORE: 'memory', MAX_CRUSH_AGENTS: '1' })
  fill(dataDir)
  const marker = tempDir(t)
  const sync = await post(app, 'crush_run', { task: scenario.sleep(60000, marker) })
  t.match(sync, {
    status: 503,
    body: { code: 'RUN_NOT_RECORDED', message: /The run could not be recorded, so its agent was stopped: ENOSPC/ }
  })
  const background = await call(app, 'POST', '/runs', {
    body: { tool: 'crush_run', task: scenario.sleep(60000, marker) }
  })
  t.match(background, { status: 503, body: { code: 'RUN_NOT_RECORDED' } }, 'POST /runs is refused the same way')
  t.same(await processesLeft(marker), [], 'no agent of either run is left')
  t.equal(app.slots.inUse('crush_run'), 0, 'the slot came back')
})

t.test('the ledger at start: ' +
  'only a recorded group that proves to be one of this service\'s runs is killed', async (t) => {
  const dataDir = tempDir(t)
  const ledger = new RunLedger(dataDir)
  const earlier = serviceLife(dataDir, 'earlier')
  const now = { env: { PATH: process.env['PATH'] }, life: serviceLife(dataDir, 'now'), wslBin: 'true' }
  const group = (mark?: string, script = 'sleep 60 & sleep 60; exit 0') => {
    const child = spawn('sh', ['-c', script], {
      detached: true, stdio: 'ignore', env: mark === undefined ? {} : { [RUN_MARK_VARIABLE]: mark }
    })
    t.teardown(() => { try { process.kill(-child.pid!, 'SIGKILL') } catch {} })
    return child
  }
  const record = (pid: number) => ({ kind: 'host-group' as const, pid, startTime: processStartTime(pid) })
  const ours = group(runMark(earlier, 'live-run'))
  ledger.started('live-run', record(ours.pid!))
  // A record someone else wrote (an agent sharing the service's uid), naming a group with its right start time.
  const foreign = group()
  ledger.started('forged', record(foreign.pid!))
  // Another service's run (another DATA_DIR) is not this one's either.
  const elsewhere = group(runMark(serviceLife(join(dataDir, 'other'), 'earlier'), 'x'))
  ledger.started('elsewhere', record(elsewhere.pid!))
  // A reused pid: the recorded group died and its number went to a process that started later, here one of another
  // run of the same earlier life (a daemon of it, leading a group of its own). It carries an earlier life's mark, so
  // only the start time tells it from the group that was recorded.
  const reused = group(runMark(earlier, 'another-run'))
  ledger.started('reused-pid', {
    kind: 'host-group', pid: reused.pid!, startTime: String(Number(processStartTime(reused.pid!)) - 1)
  })
  // No start time on record (the agent had exited when its run was recorded, leaving a job in its group): nothing
  // proves that the group under that number now is the one recorded, though it carries an earlier life's mark.
  const jobFile = join(tempDir(t), 'job.pid')
  const unproven = group(runMark(earlier, 'no-start-time'), `sleep 60 & echo $! > '${jobFile}'`)
  await once(unproven, 'exit')
  const job = await readPidFile(jobFile)
  ledger.started('no-start-time', { kind: 'host-group', pid: unproven.pid!, startTime: null })
  // A file this service never names so: whatever it holds, it is not a run of it.
  const misnamed = group(runMark(earlier, 'misnamed'))
  ledger.started('not a run id', record(misnamed.pid!))
  writeFileSync(join(dataDir, 'live', 'cut-short.json'), '{"kind":"host-')
  // A record naming a program: what a start runs to stop a WSL run is its own WSL_BIN, never that.
  const ran = join(tempDir(t), 'ran')
  const program = join(tempDir(t), 'program')
  writeFileSync(program, `#!/bin/sh\ntouch ${ran}\n`, { mode: 0o755 })
  writeFileSync(
    join(dataDir, 'live', 'planted.json'),
    JSON.stringify({ kind: 'wsl-group', wslBin: program, distro: 'Ubuntu', runId: 'planted' })
  )
  writeFileSync(
    join(dataDir, 'live', 'option.json'), JSON.stringify({ kind: 'wsl-group', distro: '--exec', runId: 'option' })
  )
  writeFileSync(join(dataDir, 'live', 'everyone.json'), JSON.stringify({ kind: 'host-group', pid: 1, startTime: '1' }))
  const oursEnded = once(ours, 'exit')
  const leftovers = await new RunLedger(dataDir).stopLeftovers(now)
  t.same(leftovers.map(({ runId, stopped }) => ({ runId, stopped })).sort((a, b) => a.runId.localeCompare(b.runId)), [
    { runId: 'elsewhere', stopped: false },
    { runId: 'forged', stopped: false },
    { runId: 'live-run', stopped: true },
    { runId: 'no-start-time', stopped: false },
    { runId: 'planted', stopped: true },
    { runId: 'reused-pid', stopped: false }
  ], 'the malformed records, and the one under a name that is no run id, are not even read as runs')
  t.notOk(existsSync(ran), 'the program a record named never ran')
  await oursEnded
  t.ok(isAlive(foreign.pid!), 'the group a forged record named still runs')
  t.ok(isAlive(elsewhere.pid!), 'and another service\'s')
  t.ok(isAlive(reused.pid!), 'and the group that got a recorded number later')
  t.ok(isAlive(job), 'and the group that nothing proves was recorded')
  t.ok(isAlive(misnamed.pid!), 'and the one named in a file that is no run\'s')
  t.same(readdirSync(join(dataDir, 'live')), [], 'every record is forgotten, the unreadable ones too')
  t.same(await new RunLedger(dataDir).stopLeftovers(now), [])
  // A group whose every process is gone: nothing to stop.
  const finished = spawn('true', { detached: true })
  await once(finished, 'exit')
  ledger.started('gone', { kind: 'host-group', pid: finished.pid!, startTime: '1' })
  t.match(await new RunLedger(dataDir).stopLeftovers(now), [{ runId: 'gone', stopped: false }])
})

import t from 'tap'
import { execFileSync } from 'node:child_process'
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { build, call, post, processesLeft, scenario, tempDir } from '../helpers/index.js'
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

t.test('a run that cannot be recorded (DATA_DIR full) is killed at once: a 503 RUN_NOT_RECORDED, no agent, its slot back', { skip: !asRoot && 'needs root (mount)' }, async (t) => {
  const dataDir = join(tempDir(t), 'data')
  mkdirSync(dataDir)
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', dataDir])
  t.teardown(() => execFileSync('umount', ['-l', dataDir]))
  const app = await build(t, { DATA_DIR: dataDir, RUNS_STORE: 'memory', MAX_CRUSH_AGENTS: '1' })
  fill(dataDir)
  const marker = tempDir(t)
  const sync = await post(app, 'crush_run', { task: scenario.sleep(60000, marker) })
  t.match(sync, { status: 503, body: { code: 'RUN_NOT_RECORDED', message: /The run could not be recorded, so its agent was stopped: ENOSPC/ } })
  const background = await call(app, 'POST', '/runs', { body: { tool: 'crush_run', task: scenario.sleep(60000, marker) } })
  t.match(background, { status: 503, body: { code: 'RUN_NOT_RECORDED' } }, 'POST /runs is refused the same way')
  t.same(await processesLeft(marker), [], 'no agent of either run is left')
  t.equal(app.slots.inUse('crush_run'), 0, 'the slot came back')
})

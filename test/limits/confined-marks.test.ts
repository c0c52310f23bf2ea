import t, { type Test } from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { confined, holdsWholeRun } from '#src/process/confined.js'
import type { Containment } from '#src/process/containment.js'
import { processGroup } from '#src/process/process-group.js'
import { hostCgroups, removeCgroups, type CgroupLayout } from '#src/process/run-cgroups.js'
import { RUN_MARK_VARIABLE, serviceLife } from '#src/process/run-marks.js'
import { isAlive, processesLeft, processesMatching, tempDir, waitFor } from '../helpers/index.js'
import { asRoot } from '../helpers/users.js'

// A run in a cgroup of its own, in process-group mode (issue 37, item 7): where the cgroup holds every process of the
// run, its end and its stop signals go through the cgroup and no environment is read; where the agent may have forked
// before it was put in, what it forked is still found by its mark.

t.test('an agent put in its cgroup after its spawn holds its whole run only if nothing but its own threads was ' +
  'started meanwhile', async (t) => {
  const threads = new Set([1001, 1002])
  const isAgentThread = (id: number) => threads.has(id)
  t.ok(holdsWholeRun(1000, 1000, isAgentThread), 'nothing at all since its spawn')
  t.ok(holdsWholeRun(1000, 1002, isAgentThread), 'its own threads only: they entered with it')
  t.notOk(holdsWholeRun(1000, 1003, isAgentThread), 'another id: maybe a child, outside the cgroup')
  t.notOk(holdsWholeRun(1000, undefined, isAgentThread), 'the last id unknown')
  t.notOk(holdsWholeRun(1000, 999, isAgentThread), 'ids wrapped around')
  t.notOk(holdsWholeRun(1000, 1000 + 65, () => true), 'too many to look through')
})

const LIMITS = { processes: 64, memoryBytes: 1 << 30 }
const probe = asRoot ? await hostCgroups(`marks-${String(process.pid)}`, LIMITS) : { reason: 'not root' }
const layout: CgroupLayout | undefined = 'layout' in probe ? probe.layout : undefined
t.teardown(() => { if (layout !== undefined) removeCgroups(layout) })
const skip = layout === undefined && 'no cgroups this service may make here (root, Linux, pids and memory controllers)'

/** A run started as agent-process.ts starts it: marked, leading its own group; controlled once `ready` resolves. */
async function startRun(containment: Containment, dir: string, file: string, args: string[]) {
  const launch = await containment.launch(file, args, { env: process.env, cwd: dir, runId: `run-${String(Date.now())}` })
  const child = spawn(launch.file, launch.args, {
    env: { ...process.env, [RUN_MARK_VARIABLE]: launch.mark }, detached: launch.detached, stdio: 'ignore'
  })
  return { launch, child }
}

/** Whatever a test leaves of its processes (found by its directory in their command lines), killed at its end. */
function reap(t: Test, dir: string, ...children: ChildProcess[]): void {
  t.teardown(() => {
    for (const child of children) child.kill('SIGKILL')
    for (const line of processesMatching(dir)) {
      try {
        process.kill(Number(line.trim().split(/\s+/)[0]), 'SIGKILL')
      } catch {
        // gone
      }
    }
  })
}

t.test('held whole by its cgroup: a daemon that left the group and cleared its environment has each stop signal ' +
  'and ends with the run, and no environment is read (a stranger wearing the run’s mark is left alone)',
{ skip }, async (t) => {
  const dir = tempDir(t)
  let agent = 0
  // This agent forks nothing for its first 300 ms, long after it is in its cgroup: the ids say so, here for sure.
  const containment = confined(processGroup(serviceLife(dir, 'held')), layout!, LIMITS, {
    lastPid: () => agent, isThreadOf: () => false
  })
  const daemon = 'trap \'touch "$0/termed"; exit 0\' TERM; touch "$0/daemon"; while :; do sleep 0.05; done'
  const script = `setTimeout(() => require('child_process').spawn('setsid', ['-f', 'env', '-i', 'sh', '-c', ` +
    `${JSON.stringify(daemon)}, ${JSON.stringify(dir)}], { stdio: 'ignore' }), 300); setInterval(() => {}, 1000)`
  const { launch, child } = await startRun(containment, dir, process.execPath, ['-e', script, dir])
  agent = child.pid!
  const contained = containment.control(child, launch)
  const stranger = spawn('sh', ['-c', 'sleep 1000; : "$0"', dir], {
    env: { ...process.env, [RUN_MARK_VARIABLE]: launch.mark }, stdio: 'ignore'
  })
  reap(t, dir, child, stranger)
  await waitFor(() => existsSync(join(dir, 'daemon')), 5000, 'the daemon')
  const exit = once(child, 'exit')
  await contained.signal('SIGTERM')
  await waitFor(() => existsSync(join(dir, 'termed')), 5000, 'the daemon to have SIGTERM through the cgroup')
  await exit
  await contained.sweep()
  const strangerLine = `${String(stranger.pid)} `
  t.same((await processesLeft(dir)).filter((line) => !line.trim().startsWith(strangerLine)), [], 'nothing of the run is left')
  t.ok(isAlive(stranger.pid!), 'the stranger outside the cgroup was not looked for')
})

t.test('forked before it entered its cgroup: what it forked is outside, and found by its mark at the run’s end',
  { skip }, async (t) => {
    const dir = tempDir(t)
    const containment = confined(processGroup(serviceLife(dir, 'late')), layout!, LIMITS)
    const script = 'setsid -f sh -c \'touch "$0/daemon"; sleep 1000; : "$0"\' "$0"; sleep 1000; : "$0"'
    const { launch, child } = await startRun(containment, dir, '/bin/sh', ['-c', script, dir])
    reap(t, dir, child)
    // Its daemon is started before the agent is put in its cgroup: the window this rule is about, held open.
    await waitFor(() => existsSync(join(dir, 'daemon')), 5000, 'the daemon')
    const contained = containment.control(child, launch)
    const exit = once(child, 'exit')
    await contained.signal('SIGKILL')
    await exit
    await contained.sweep()
    t.same(await processesLeft(dir), [], 'the daemon outside the cgroup ended with its run')
  })

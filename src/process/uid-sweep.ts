import { spawn } from 'node:child_process'
import { procFilesMatching } from './proc-pids.js'

/**
 * A token's own uid (AGENT_USERS) is nobody else's: once no run of it is live, every process of that uid is a
 * leftover, whatever it did to hide (left the group, cleared its environment, hopped from pid to pid, made itself
 * non-dumpable). Process-group mode counts each uid's live runs here, and the last one to end sweeps the uid whole.
 */
const liveRuns = new Map<number, number>()

export function uidRunStarted(uid: number): void {
  liveRuns.set(uid, (liveRuns.get(uid) ?? 0) + 1)
}

/** The run has ended: true when it was the uid's last live one. */
export function uidRunEnded(uid: number): boolean {
  const left = (liveRuns.get(uid) ?? 1) - 1
  if (left > 0) liveRuns.set(uid, left)
  else liveRuns.delete(uid)
  return left <= 0
}

/** The processes whose real uid is `uid`, from /proc/<pid>/status (no /proc: none). */
export function processesOfUid(uid: number): Promise<number[]> {
  return procFilesMatching('status', (contents) => {
    const status = contents.toString('latin1')
    const real = /^Uid:\s+(\d+)/m.exec(status)?.[1]
    return real !== undefined && Number(real) === uid && !/^State:\s+Z/m.test(status)
  })
}

/**
 * kill(-1, SIGKILL) as the uid itself: the kernel signals every process that uid may signal, its own, in one call
 * made under the task list's lock, so no pid is looked up and then reused by someone else before the signal, and no
 * process of the uid forks past it (a fork with SIGKILL pending fails). Signalled first, then looked at: a scan of
 * /proc can miss a process forking then exiting in a loop (its child not yet listed, itself gone), and would call the
 * uid empty. Rounds until /proc shows none left (the killed may take a moment to go).
 */
export async function killEveryProcessOf(uid: number, rounds = 50): Promise<number[]> {
  for (let round = 0; round < rounds; round++) {
    await new Promise<void>((resolve) => {
      const identity = ['--reuid', String(uid), '--regid', String(uid), '--clear-groups']
      spawn('setpriv', [...identity, '--', 'sh', '-c', 'kill -KILL -1'], { stdio: 'ignore' })
        .once('error', () => resolve())
        .once('exit', () => resolve())
    })
    if ((await processesOfUid(uid)).length === 0) return []
  }
  return processesOfUid(uid)
}

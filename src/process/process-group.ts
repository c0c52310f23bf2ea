import type { ChildProcess } from 'node:child_process'
import type { ContainedRun, Containment, StopSignal } from './containment.js'
import { processGroupOf, processStartTime, signalGroup } from './posix-signals.js'
import { killMarked, runMark, signalMarked, type ServiceLife } from './run-marks.js'
import { killEveryProcessOf, uidRunEnded, uidRunStarted } from './uid-sweep.js'

/**
 * Signals and sweeps one process group led by the spawned process, and with a `mark`, every process carrying it
 * wherever it went.
 */
export function groupControl(
  child: ChildProcess,
  mapExit: ContainedRun['exit'],
  mark?: string,
  ownUid?: number
): ContainedRun {
  const leader = child.pid!
  const isThisRun = (found: string): boolean => found === mark
  if (ownUid !== undefined) uidRunStarted(ownUid)
  let ended = false
  return {
    leftover: { kind: 'host-group', pid: leader, startTime: processStartTime(leader) },
    async signal(signal: StopSignal) {
      signalGroup(leader, signal)
      // Those still in the group have just had it: an agent counting its signals must see each stop once.
      if (mark !== undefined) await signalMarked(isThisRun, signal, (pid) => processGroupOf(pid) !== leader)
    },
    // Descendants the agent left in its group (stuck tools, background jobs) go with it, then those that left it.
    async sweep() {
      signalGroup(leader, 'SIGKILL')
      if (mark !== undefined) await killMarked(isThisRun)
      // Once per run (a run never recorded is swept twice): its uid's last run sweeps every process of it.
      if (ownUid === undefined || ended) return
      ended = true
      if (uidRunEnded(ownUid)) await killEveryProcessOf(ownUid)
    },
    exit: mapExit
  }
}

/**
 * The agent leads its own process group: stopping reaches every descendant that stayed in it; given the service's
 * life, each run's processes are marked too, so those that left the group are found by their mark.
 */
export function processGroup(life?: ServiceLife): Containment {
  return {
    mode: 'process-group',
    launch: async (file, args, { user, runId }) => ({
      file,
      args,
      detached: true,
      ...(user === undefined ? {} : { uid: user.uid, gid: user.gid }),
      ...(life === undefined ? {} : { mark: runMark(life, runId) }),
      // A token's own user (AGENT_USERS) is swept whole once its last run ends; AGENT_USER may be anyone's too.
      ...(user?.listed === false ? { ownUid: user.uid } : {})
    }),
    control: (child, launch) =>
      groupControl(child, (exitCode, signal) => ({ exitCode, signal }), launch.mark, launch.ownUid)
  }
}

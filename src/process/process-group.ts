import type { ChildProcess } from 'node:child_process'
import type { ContainedRun, Containment, StopSignal } from './containment.js'
import { processStartTime, signalGroup } from './posix-signals.js'

/** Signals and sweeps one process group led by the spawned process. */
export function groupControl(child: ChildProcess, mapExit: ContainedRun['exit']): ContainedRun {
  const leader = child.pid!
  return {
    leftover: { kind: 'host-group', pid: leader, startTime: processStartTime(leader) },
    async signal(signal: StopSignal) {
      signalGroup(leader, signal)
    },
    // Descendants the agent left in its group (stuck tools, background jobs) go with it.
    async sweep() {
      signalGroup(leader, 'SIGKILL')
    },
    exit: mapExit
  }
}

/** The agent leads its own process group: stopping reaches every descendant that stayed in it. */
export const processGroup: Containment = {
  mode: 'process-group',
  launch: async (file, args, { user }) => ({
    file,
    args,
    detached: true,
    ...(user === undefined ? {} : { uid: user.uid, gid: user.gid })
  }),
  control: (child) => groupControl(child, (exitCode, signal) => ({ exitCode, signal }))
}

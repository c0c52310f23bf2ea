import type { ContainedRun, Containment, StopSignal } from './containment.js'
import { processGroupOf } from './posix-signals.js'
import { isThreadOf, lastPid } from './proc-pids.js'
import { RunCgroup, type CgroupLayout, type LimitReached, type RunLimits } from './run-cgroups.js'

/**
 * Puts the process it starts in the cgroup files it is given, then becomes the command: what the service starts as
 * root is in the run's cgroup before it forks anything. Fixed text; the files and the command are its arguments.
 */
const ENTER_SCRIPT = 'for f do [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; shift; done; shift; exec "$@"'

/** How often a run's cgroup is looked at for a limit crossed: a fork bomb is stopped within this. */
const LIMIT_POLL_MS = 250

const entersItself = (containment: Containment): boolean => containment.mode === 'pid-namespace'

/** A cgroup for an agent already running: if the host refuses one now, the run goes on unbounded rather than crash. */
function createdOrNot(layout: CgroupLayout, runId: string, limits: RunLimits): RunCgroup | undefined {
  try {
    return RunCgroup.create(layout, runId, limits)
  } catch {
    return undefined
  }
}

/** A run's cgroup as its launch left it: made (a PID namespace enters it itself), or to make once spawned. */
type CgroupOf = { made: RunCgroup } | { later: { runId: string; limits: RunLimits } }

/** More ids handed out than this since the agent's spawn: a busy host, not worth looking through. */
const WINDOW_MAX = 64

/**
 * Whether an agent put in its cgroup after its spawn holds every process of its run there, given the last id the
 * kernel handed out once it was in. Ids are handed out in turn, so each one after the agent's own pid was handed out
 * between its spawn and its entering: none, or only its own threads (which enter with it), and it forked nothing
 * outside the cgroup. Anything else (another process's, or an id gone already, which may have been its child) and
 * what it started may be outside: then it is looked for by its mark as before.
 */
export function holdsWholeRun(
  agent: number,
  last: number | undefined,
  isAgentThread: (id: number) => boolean
): boolean {
  if (last === undefined || last < agent || last - agent > WINDOW_MAX) return false
  for (let id = agent + 1; id <= last; id++) if (!isAgentThread(id)) return false
  return true
}

/** How the host hands out process ids: what holdsWholeRun reads, given (a test may say what it saw). */
interface HostIds {
  lastPid: () => number | undefined
  isThreadOf: (pid: number, id: number) => boolean
}

const HOST_IDS: HostIds = { lastPid, isThreadOf }

/** A stop signal to each process of the run that left the agent's group (which has just had it): each sees it once. */
function signalOutsideGroup(cgroup: RunCgroup, leader: number, signal: StopSignal): void {
  for (const pid of cgroup.processes()) {
    if (processGroupOf(pid) === leader) continue
    try {
      process.kill(pid, signal)
    } catch {
      // gone meanwhile
    }
  }
}

/**
 * A containment whose every run has a cgroup of its own (run-cgroups.ts): its processes, memory and CPU share are
 * bounded (the service's limits, or the run's own where its tool has some) whatever it does, a run crossing a limit
 * is stopped as a deadline stops it (the listener's reason), and its end ends every process left in the cgroup.
 */
export function confined(inner: Containment, layout: CgroupLayout, limits: RunLimits, ids = HOST_IDS): Containment {
  const cgroupOf = new WeakMap<object, CgroupOf>()
  return {
    mode: inner.mode,
    ...(inner.bindsFiles === true ? { bindsFiles: true } : {}),
    launch: async (file, args, context) => {
      const launch = await inner.launch(file, args, context)
      const runLimits = { ...limits, ...context.limits }
      // Made once the agent is spawned where it enters after spawn: a spawn that fails leaves no cgroup behind.
      if (!entersItself(inner)) {
        const later = { ...launch }
        cgroupOf.set(later, { later: { runId: context.runId, limits: runLimits } })
        return later
      }
      const cgroup = await RunCgroup.made(layout, context.runId, runLimits)
      // A PID namespace's chain forks at once (unshare --fork): its first process, root's, puts itself in before.
      // Elsewhere the agent is put in as soon as spawn returns (it has just exec'd its CLI: whether it forked already
      // is looked at then, holdsWholeRun), and spawn's own failures (a missing binary) stay spawn's.
      const entering = ['-c', ENTER_SCRIPT, 'sh', ...cgroup.procsFiles(), '--', launch.file, ...launch.args]
      const confinedLaunch = { ...launch, file: '/bin/sh', args: entering }
      cgroupOf.set(confinedLaunch, { made: cgroup })
      return confinedLaunch
    },
    control: (child, launch): ContainedRun => {
      const of = cgroupOf.get(launch)
      const cgroup = of === undefined || 'made' in of ? of?.made : createdOrNot(layout, of.later.runId, of.later.limits)
      if (of === undefined || cgroup === undefined) return inner.control(child, launch)
      const leader = child.pid!
      // The marks (process-group mode) find what left the agent's group by reading every process's environment: a
      // scan of the whole host at each stop signal and at the run's end. A cgroup
      // that holds the whole run makes it redundant: what left the group is still in the cgroup, signalled through it
      // and ended with it. The only way out of the cgroup that keeps the mark is a write into another cgroup's
      // cgroup.procs, which only root may make (the cgroups are root's): an agent running as root (no AGENT_USER)
      // that moves itself on purpose or through a tool that does (systemd-run --scope). Such an agent can as well
      // clear its environment or kill the service, so the mark never held it. The runs are marked all the same: a
      // killed life's leftovers are found by their mark at the next start (service/platform.ts).
      const heldWhole = 'later' in of && cgroup.enter(leader) &&
        holdsWholeRun(leader, ids.lastPid(), (id) => ids.isThreadOf(leader, id))
      const run = inner.control(child, heldWhole ? { ...launch, mark: undefined } : launch)
      const listeners: Array<(reason: LimitReached) => void> = []
      const watch = setInterval(() => {
        const reached = cgroup.reached()
        if (reached === null) return
        clearInterval(watch)
        for (const listener of listeners) listener(reached)
      }, LIMIT_POLL_MS)
      watch.unref()
      return {
        ...run,
        signal: async (signal) => {
          await run.signal(signal)
          if (heldWhole) signalOutsideGroup(cgroup, leader, signal)
        },
        onLimit: (listener) => { listeners.push(listener) },
        sweep: async () => {
          clearInterval(watch)
          await run.sweep()
          await cgroup.end()
        },
        limitReached: () => cgroup.reached()
      }
    }
  }
}

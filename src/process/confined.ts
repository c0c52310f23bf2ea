import type { ContainedRun, Containment } from './containment.js'
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

/**
 * A containment whose every run has a cgroup of its own (run-cgroups.ts): its processes, memory and CPU share are
 * bounded (the service's limits, or the run's own where its tool has some) whatever it does, a run crossing a limit
 * is stopped as a deadline stops it (the listener's reason), and its end ends every process left in the cgroup.
 */
export function confined(inner: Containment, layout: CgroupLayout, limits: RunLimits): Containment {
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
      const cgroup = RunCgroup.create(layout, context.runId, runLimits)
      // A PID namespace's chain forks at once (unshare --fork): its first process, root's, puts itself in before.
      // Elsewhere the agent is put in as soon as spawn returns: it has just exec'd its CLI, which forks nothing yet,
      // and spawn's own failures (a missing binary) stay spawn's.
      const entering = ['-c', ENTER_SCRIPT, 'sh', ...cgroup.procsFiles(), '--', launch.file, ...launch.args]
      const confinedLaunch = { ...launch, file: '/bin/sh', args: entering }
      cgroupOf.set(confinedLaunch, { made: cgroup })
      return confinedLaunch
    },
    control: (child, launch): ContainedRun => {
      const run = inner.control(child, launch)
      const of = cgroupOf.get(launch)
      const cgroup = of === undefined
        ? undefined
        : 'made' in of ? of.made : createdOrNot(layout, of.later.runId, of.later.limits)
      if (cgroup === undefined) return run
      if (of !== undefined && 'later' in of) cgroup.enter(child.pid!)
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

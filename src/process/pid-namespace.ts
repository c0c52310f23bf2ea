import { spawn } from 'node:child_process'
import { groupsOption, type AgentUser } from './agent-user.js'
import type { Command, Containment } from './containment.js'
import { findOnPath } from './find-executable.js'
import { AgentSpawnError } from './spawn-error.js'
import { exitThroughInit } from './posix-signals.js'
import { groupControl } from './process-group.js'
import { runMark, type ServiceLife } from './run-marks.js'

/** The programs that build the namespace, found once on the service's own PATH. */
export interface NamespaceTools {
  setpriv: string
  unshare: string
  tini: string
  /**
   * Not root: the namespace needs a user namespace, with the caller's own uid mapped (never root: claude refuses
   * it).
   */
  userNamespace: boolean
}

/**
 * A command that dies with the service, even by SIGKILL: setpriv gives it a parent-death signal, then becomes it (one
 * exec more). Each run's namespace chain starts this way, and so do the service's own probes. A set-user-ID program
 * would drop the signal (the kernel clears it): never sudo.
 */
export function diesWithService(tools: NamespaceTools): (command: Command) => Command {
  return ({ file, args }) => ({ file: tools.setpriv, args: ['--pdeathsig', 'KILL', '--', file, ...args] })
}

/**
 * setpriv → unshare → tini → agent:
 * - setpriv gives unshare a parent-death signal, so the service's death (even SIGKILL) ends the run;
 * - unshare creates the PID namespace (and a mount namespace with its own /proc, so `ps` shows the run's processes),
 *   and with --kill-child takes the namespace down with it;
 * - tini is the namespace's init: it forwards the service's signals to the agent's process group and reaps orphans.
 *   When the agent exits, tini exits, and the kernel kills whatever is left in the namespace, daemons included.
 * All of them lead one process group on the host, which the service signals like any other.
 */
function namespaceCommand(tools: NamespaceTools, file: string, args: string[], user?: AgentUser): Command {
  return diesWithService(tools)({
    file: tools.unshare,
    args: [
      ...(tools.userNamespace ? ['--user', '--map-current-user'] : []),
      '--pid', '--fork', '--kill-child', '--mount-proc', '--',
      // AGENT_USER: inside the namespace, before its init, everything drops to that user (and its groups).
      ...(user === undefined
        ? []
        : [tools.setpriv, '--reuid', String(user.uid), '--regid', String(user.gid), ...groupsOption(user), '--']),
      tools.tini, '-g', '--',
      file, ...args
    ]
  })
}

/**
 * Given the service's life, runs are marked here too: not to find their processes (the namespace holds them all) but
 * so that a later life can prove a ledger record names one of its runs.
 */
export function pidNamespace(tools: NamespaceTools, life?: ServiceLife): Containment {
  return {
    mode: 'pid-namespace',
    launch: async (file, args, { env, cwd, user, runId }) => {
      // The wrapper would start and only then fail to find the agent: say it before, the way spawn would have.
      if ((await findOnPath(file, env['PATH'] ?? '', cwd)) === undefined) throw AgentSpawnError.notFound(file)
      return {
        ...namespaceCommand(tools, file, args, user),
        detached: true,
        ...(life === undefined ? {} : { mark: runMark(life, runId) })
      }
    },
    // tini reports the agent's death by signal N as 128 + N.
    control: (child) => groupControl(child, exitThroughInit)
  }
}

/** Whether this host lets the service build the namespace: one real, empty run of the whole chain. */
export function namespaceWorks(tools: NamespaceTools, timeoutMs = 5000): Promise<boolean> {
  const { file, args } = namespaceCommand(tools, 'true', [])
  return new Promise((resolve) => {
    const child = spawn(file, args, { stdio: 'ignore', timeout: timeoutMs })
    child.once('error', () => resolve(false))
    child.once('exit', (code) => resolve(code === 0))
  })
}

import { spawn } from 'node:child_process'
import { groupsOption, type AgentUser } from './agent-user.js'
import type { Command, Containment, FileBind } from './containment.js'
import { assertFoundBeforeWrapper } from './find-executable.js'
import { exitThroughInit } from './posix-signals.js'
import { groupControl } from './process-group.js'
import { runMark, type ServiceLife } from './run-marks.js'

/** The programs that build the namespace, found once on the service's own PATH. */
export interface NamespaceTools {
  setpriv: string
  unshare: string
  tini: string
  /** util-linux mount: as root, the namespace binds the files a run asks for (FileBind), then drops to the agent. */
  mount?: string | undefined
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
 * Binds each source onto its target ($1 is mount), then becomes the rest: fixed text, the paths its parameters. A bind
 * that fails fails the run (125, as a failed start): an agent without the shim in place would be unwatched.
 */
const BIND_SCRIPT =
  'mount=$1; shift; while [ "$1" != -- ]; do "$mount" --bind -- "$1" "$2" || exit 125; shift 2; done; shift; exec "$@"'

const bindingFirst = (mount: string, binds: readonly FileBind[]): string[] =>
  ['/bin/sh', '-c', BIND_SCRIPT, 'sh', mount, ...binds.flatMap(({ source, target }) => [source, target]), '--']

/**
 * setpriv → unshare → tini → agent:
 * - setpriv gives unshare a parent-death signal, so the service's death (even SIGKILL) ends the run;
 * - unshare creates the PID namespace (and a mount namespace with its own /proc, so `ps` shows the run's processes),
 *   and with --kill-child takes the namespace down with it;
 * - tini is the namespace's init: it forwards the service's signals to the agent's process group and reaps orphans.
 *   When the agent exits, tini exits, and the kernel kills whatever is left in the namespace, daemons included.
 * All of them lead one process group on the host, which the service signals like any other.
 */
function namespaceCommand(
  tools: NamespaceTools,
  file: string,
  args: string[],
  user?: AgentUser,
  binds: readonly FileBind[] = []
): Command {
  return diesWithService(tools)({
    file: tools.unshare,
    args: [
      ...(tools.userNamespace ? ['--user', '--map-current-user'] : []),
      '--pid', '--fork', '--kill-child', '--mount-proc', '--',
      // Still root, in the run's own mount namespace (private: nothing of it is seen outside): the binds, in order.
      ...(binds.length === 0 || tools.mount === undefined ? [] : bindingFirst(tools.mount, binds)),
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
    bindsFiles: !tools.userNamespace && tools.mount !== undefined,
    launch: async (file, args, { env, cwd, user, runId, binds }) => {
      await assertFoundBeforeWrapper(file, env, cwd)
      return {
        ...namespaceCommand(tools, file, args, user, binds),
        detached: true,
        ...(life === undefined ? {} : { mark: runMark(life, runId) }),
        // A token's own user (AGENT_USERS) is swept whole once its last run ends: what its uid started outside the
        // namespace (a program git ran for the run) is not the namespace's to end.
        ...(user?.listed === false ? { ownUid: user.uid } : {})
      }
    },
    // tini reports the agent's death by signal N as 128 + N.
    control: (child, launch) => groupControl(child, exitThroughInit, undefined, launch.ownUid)
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

import type { ContainmentMode } from '../schemas/health.js'
import type { Command, Containment } from './containment.js'
import { findOnPath } from './find-executable.js'
import { diesWithService, namespaceWorks, pidNamespace, type NamespaceTools } from './pid-namespace.js'
import { processGroup } from './process-group.js'
import type { ServiceLife } from './run-marks.js'
import { windowsTree } from './windows-tree.js'

export const CONTAINMENT_SETTINGS = ['auto', 'pid-namespace', 'process-group'] as const
export type ContainmentSetting = (typeof CONTAINMENT_SETTINGS)[number]

export interface HostContainment {
  containment: Containment
  /** Why this mode and not a stronger one, for the startup log and /readyz. */
  reason: string
  /**
   * A short-lived helper the service starts itself (an agent's --version probe), tied to the service's life where the
   * host allows: a helper that hangs must not outlive a service killed with SIGKILL.
   */
  bindToService: (command: Command) => Command
}

const unbound = (command: Command): Command => command

/** What a run's processes can do to outlive it in a mode: the guarantee, said plainly for /readyz and the start log. */
export function whatEscapes(
  mode: ContainmentMode,
  platform: NodeJS.Platform = process.platform,
  perTokenUsers = false,
  cgroupPerRun = false
): string {
  switch (mode) {
    case 'pid-namespace':
      return 'nothing: daemons, setsid and double forks end with the run'
    case 'process-group':
      if (cgroupPerRun) return 'nothing: every process left in the run\'s cgroup ends with it'
      if (platform === 'linux' && perTokenUsers) {
        return 'while another run of the same token is live, a process that left the agent\'s process group and ' +
          'cleared its environment; every process of the token\'s uid ends with its last run'
      }
      return platform === 'linux'
        ? 'a process that leaves the agent\'s process group and also clears its environment (setsid env -i, ' +
          'sudo\'s env_reset); apt-get install tini for pid-namespace, which holds those too'
        : 'a process that leaves the agent\'s process group (setsid, daemons)'
    case 'wsl-process-group':
      return 'a process that leaves the agent\'s process group inside the distro'
    case 'windows-tree':
      return 'what the agent leaves when it exits by itself, and its tree when taskkill fails'
  }
}

async function namespaceTools(path: string): Promise<NamespaceTools | string> {
  const [setpriv, unshare, tini, mount] = await Promise.all([
    findOnPath('setpriv', path),
    findOnPath('unshare', path),
    (async () => (await findOnPath('tini', path)) ?? findOnPath('tini-static', path))(),
    findOnPath('mount', path)
  ])
  if (setpriv === undefined || unshare === undefined) return 'util-linux setpriv and unshare are not on PATH'
  if (tini === undefined) return 'tini is not on PATH (apt-get install tini)'
  return { setpriv, unshare, tini, mount, userNamespace: process.getuid?.() !== 0 }
}

/** One probe per set of tools and process: building an app (each test does) must not spawn the chain again. */
const probes = new Map<string, Promise<boolean>>()

/**
 * The strongest containment this host offers, probed by running it once: a PID namespace where util-linux, tini and
 * the kernel allow it (root, or unprivileged user namespaces), else the process group. A mode asked for by name that
 * cannot work is an error at start rather than a weaker guarantee than the operator believes. Given the service's
 * `life`, process-group mode marks each run's processes so that those leaving the group are found too.
 */
export async function chooseHostContainment(
  setting: ContainmentSetting,
  path = process.env['PATH'] ?? '',
  life?: ServiceLife
): Promise<HostContainment> {
  if (setting === 'pid-namespace' && process.platform !== 'linux') {
    throw new Error(`AGENT_CONTAINMENT=pid-namespace cannot work here: ${process.platform} has no PID namespaces`)
  }
  if (process.platform === 'win32') {
    const reason = 'Windows: the agent\'s process tree, with taskkill'
    return { containment: windowsTree(), reason, bindToService: unbound }
  }
  if (setting === 'process-group' || process.platform !== 'linux') {
    const reason = setting === 'process-group'
      ? 'AGENT_CONTAINMENT=process-group'
      : `no PID namespaces on ${process.platform}`
    return { containment: processGroup(life), reason, bindToService: unbound }
  }
  const tools = await namespaceTools(path)
  let failure = typeof tools === 'string' ? tools : undefined
  if (typeof tools !== 'string') {
    const key = JSON.stringify(tools)
    if (!probes.has(key)) probes.set(key, namespaceWorks(tools))
    if (await probes.get(key)!) {
      const reason = 'PID namespaces work here'
      return { containment: pidNamespace(tools, life), reason, bindToService: diesWithService(tools) }
    }
    failure = tools.userNamespace
      ? 'this user may not create a user and PID namespace ' +
        '(unprivileged user namespaces disabled, or a seccomp profile)'
      : 'unshare --pid --mount-proc failed (in a container: --cap-add SYS_ADMIN, or a user namespace)'
  }
  if (setting === 'pid-namespace') throw new Error(`AGENT_CONTAINMENT=pid-namespace cannot work here: ${failure!}`)
  return { containment: processGroup(life), reason: failure!, bindToService: unbound }
}

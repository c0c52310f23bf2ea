import type { Containment } from './containment.js'
import { assertFoundBeforeWrapper, findOnPath } from './find-executable.js'

/**
 * Where the host gives no cgroup per run: a token's own user (AGENT_USERS) gets RLIMIT_NPROC, which the kernel counts
 * per uid: at most `processes` of that uid at once, across all of the token's runs, so a fork bomb's forks fail
 * (EAGAIN) while the service and other tokens' runs go on. The limit is set by util-linux prlimit before anything of
 * the run starts (as root in pid-namespace mode, which the limit spares, then inherited by the token's user); an
 * AGENT_USER shared with others, or the service's own user, is left alone: the limit would be theirs too. Memory has
 * no rlimit the agents survive (Node reserves its heap's address space: RLIMIT_AS and RLIMIT_DATA crash it).
 */
function perTokenProcessLimit(inner: Containment, prlimit: string, processes: number): Containment {
  return {
    ...inner,
    launch: async (file, args, context) => {
      const launch = await inner.launch(file, args, context)
      if (context.user?.listed !== false) return launch
      await assertFoundBeforeWrapper(file, context.env, context.cwd)
      const limit = String(context.limits?.processes ?? processes)
      return { ...launch, file: prlimit, args: [`--nproc=${limit}:${limit}`, '--', launch.file, ...launch.args] }
    }
  }
}

/**
 * The runs' containment where no cgroup bounds them (`noCgroups` says why), and what then bounds them: a process
 * limit per token where tokens have users of their own (AGENT_USERS) and prlimit is on the service's PATH.
 */
export async function withoutCgroups(
  inner: Containment,
  options: { processes: number | undefined; tokenUsers: boolean; path: string; noCgroups: string }
): Promise<{ containment: Containment; limits: string }> {
  const { processes, noCgroups } = options
  const prlimit = processes === undefined || !options.tokenUsers || process.platform !== 'linux'
    ? undefined
    : await findOnPath('prlimit', options.path)
  if (processes === undefined || prlimit === undefined) return { containment: inner, limits: noCgroups }
  return {
    containment: perTokenProcessLimit(inner, prlimit, processes),
    limits: `${String(processes)} processes per token (RLIMIT_NPROC of its own user), no memory or CPU bound: no ` +
      `cgroup per run (${noCgroups.replace(/^none: /, '')})`
  }
}

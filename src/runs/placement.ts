import { serviceError } from '../errors.js'
import { asAgentUser, type AgentUser } from '../process/agent-user.js'
import type { Containment } from '../process/containment.js'
import { searchPath } from '../process/search-path.js'
import { wslCommand, wslProcessEnv, wslProcessGroup, type WslTarget } from '../process/wsl-group.js'
import type { RunParams } from '../schemas/run.js'
import type { SudoContext } from '../sudo/probe.js'
import { WSL_SUDO_PRELUDE } from '../sudo/shim.js'
import { withWslEnv } from '../agents/environment.js'
import type { AgentCommand } from '../process/agent-process.js'
import type { AgentInvocation } from '../agents/tools.js'

/** Where one run goes and everything that follows from it, decided once. */
export interface Placement {
  where: 'host' | 'wsl'
  /** Who the agent runs as on the host (AGENT_USER); WSL runs are the distro user's. */
  user: AgentUser | undefined
  /** What is spawned (and shown as the result's `command`): the agent itself, or the wsl.exe call that runs it. */
  command: AgentCommand
  containment: Containment
  env: NodeJS.ProcessEnv
  sudo: SudoContext
  /** Inside WSL: the distro, user and directory wsl.exe is asked for. */
  wsl?: WslTarget
}

export interface PlacementInput {
  params: Pick<RunParams, 'cwd' | 'wsl_distro' | 'wsl_user'>
  agentBin: string
  /** The agent's own argv after the binary (the task never readable as a flag in it) and its standard input. */
  agent: AgentInvocation
  /** The platform deciding the argv shape (AGENT_HOST_PLATFORM): only a Windows host runs agents inside WSL. */
  hostPlatform: NodeJS.Platform
  wslBin: string
  hostContainment: Containment
  env: NodeJS.ProcessEnv
  runId: string
  /** Where a host run goes without a cwd (AGENT_WORKDIR); a WSL run goes to the distro user's home. */
  defaultCwd: string
  /** AGENT_USER, for host runs. */
  user?: AgentUser | undefined
}

/**
 * wsl.exe splits its own options by its own rules: a value ends at the first blank with quotes kept as they are, and
 * only --cd strips a pair of quotes, ending at the next `"` with no escapes. Node quotes a value holding a blank or a
 * quote MSVCRT-style (`\"`, trailing backslashes doubled), which that parser misreads: the rest of the path would be
 * read as wsl.exe options, or as a command for the distro's shell. Such a cwd is refused. (The task and the agent's
 * argv come after --exec, which wsl.exe splits with CommandLineToArgvW, the rules Node's quoting is made for.)
 */
export function wslCwdProblem(cwd: string): string | null {
  if (cwd.includes('"')) return 'body/cwd: a directory inside WSL cannot contain `"`: wsl.exe would end --cd at it'
  if (/[ \t]/.test(cwd) && cwd.endsWith('\\')) {
    return 'body/cwd: a directory inside WSL with a space cannot end with `\\`: wsl.exe would read it doubled'
  }
  return null
}

/**
 * The same run, its agent started in `cwd` instead (its worktree): inside WSL, wsl.exe is told so by its `--cd`, which
 * comes before `--exec` and the agent's own argv.
 */
export function placedIn(placement: Placement, cwd: string): Placement {
  if (placement.wsl === undefined) return { ...placement, command: { ...placement.command, cwd } }
  const problem = wslCwdProblem(cwd)
  if (problem !== null) throw serviceError('WSL_ARGUMENT_UNSAFE', problem)
  const args = [...placement.command.args]
  const at = args.indexOf('--cd')
  if (at < 0 || at > args.indexOf('--exec')) throw new Error('a WSL run is placed with --cd before --exec')
  args[at + 1] = cwd
  return { ...placement, command: { ...placement.command, args }, wsl: { ...placement.wsl, cwd } }
}

/** Decides where a run goes, without side effects: the one place that knows whether a run goes into WSL. */
export function placeRun(input: PlacementInput): Placement {
  const { params, agentBin, agent, env } = input
  // Only a Windows host runs agents inside WSL: elsewhere a run asking for a distro would run somewhere it did not ask.
  if (input.hostPlatform !== 'win32' && params.wsl_distro !== undefined) {
    throw serviceError('WSL_NOT_AVAILABLE', input.hostPlatform)
  }
  if (params.wsl_distro === undefined) {
    return {
      where: 'host',
      user: input.user,
      command: { file: agentBin, args: agent.args, cwd: params.cwd ?? input.defaultCwd, input: agent.input },
      containment: input.hostContainment,
      env: asAgentUser(env, input.user),
      sudo: { kind: 'host', path: searchPath(env), user: input.user }
    }
  }
  // Without --cd, wsl.exe would start in the Windows directory of the service itself.
  const target: WslTarget = {
    wslBin: input.wslBin, distro: params.wsl_distro, user: params.wsl_user, cwd: params.cwd ?? '~'
  }
  return {
    where: 'wsl',
    user: undefined,
    // wsl.exe relays its standard input to the distro's process: the task crosses no command line there either.
    command: {
      ...wslCommand(target, input.runId, agentBin, agent.args, WSL_SUDO_PRELUDE), cwd: undefined, input: agent.input
    },
    containment: wslProcessGroup(target, input.runId, env),
    // WSL hands a Windows process's variables to the distro only when WSLENV names them.
    env: wslProcessEnv(withWslEnv(env)),
    sudo: { kind: 'wsl', wslBin: input.wslBin, distro: target.distro, user: target.user },
    wsl: target
  }
}

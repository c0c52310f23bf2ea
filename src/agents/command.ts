import type { RunParams } from '../schemas/run.js'

export interface AgentCommand {
  file: string
  args: string[]
  /** Host directory to spawn in; undefined inside WSL, where the directory travels as `--cd`. */
  cwd: string | undefined
}

export interface CommandInput {
  params: Pick<RunParams, 'cwd' | 'wsl_distro' | 'wsl_user'>
  agentBin: string
  /** The agent's own argv after the binary, options already ended so the task can never read as a flag. */
  agentArgs: string[]
  hostPlatform: NodeJS.Platform
  wslBin: string
}

export function runsInWsl(params: Pick<RunParams, 'wsl_distro'>, hostPlatform: NodeJS.Platform): boolean {
  return hostPlatform === 'win32' && params.wsl_distro !== undefined
}

/**
 * The whole argv of a run, built without side effects. Inside WSL the agent goes after `--exec`, never `--`: wsl.exe
 * hands whatever follows `--` to the distro's shell, where `$(…)` in a task would execute.
 */
export function buildAgentCommand({ params, agentBin, agentArgs, hostPlatform, wslBin }: CommandInput): AgentCommand {
  if (!runsInWsl(params, hostPlatform)) {
    return { file: agentBin, args: agentArgs, cwd: params.cwd }
  }
  return {
    file: wslBin,
    args: [
      '-d', params.wsl_distro!,
      ...(params.wsl_user === undefined ? [] : ['-u', params.wsl_user]),
      ...(params.cwd === undefined ? [] : ['--cd', params.cwd]),
      '--exec', agentBin, ...agentArgs
    ],
    cwd: undefined
  }
}

import { CommandLineTooLong, WslArgumentUnsafe, WslDistroNotFound } from '../errors.js'
import { WINDOWS_COMMAND_LINE_MAX, windowsCommandLine } from '../process/windows-command-line.js'
import type { WslDistros } from '../process/wsl-distros.js'
import { wslCommand } from '../process/wsl-group.js'
import type { RunParams } from '../schemas/run.js'
import type { AgentTool } from './definitions.js'
import { runsInWsl, wslTarget } from './placement.js'

/** A run id has this length whatever it is; the length check needs no real one. */
const SAMPLE_RUN_ID = '00000000-0000-0000-0000-000000000000'

/**
 * wsl.exe splits its own options by its own rules: a value ends at the first blank with quotes kept as they are, and
 * only --cd strips a pair of quotes, ending at the next `"` with no escapes. Node quotes a value holding a blank or a
 * quote MSVCRT-style (`\"`, trailing backslashes doubled), which that parser misreads: the rest of the path would be read
 * as wsl.exe options, or as a command for the distro's shell. Such a cwd is refused. (The task and the agent's argv come
 * after --exec, which wsl.exe splits with CommandLineToArgvW, the rules Node's quoting is made for.)
 */
export function wslCwdProblem(cwd: string): string | null {
  if (cwd.includes('"')) return 'body/cwd: a directory inside WSL cannot contain `"`: wsl.exe would end --cd at it'
  if (/[ \t]/.test(cwd) && cwd.endsWith('\\')) {
    return 'body/cwd: a directory inside WSL with a space cannot end with `\\`: wsl.exe would read it doubled'
  }
  return null
}

/** The argv a Windows host would spawn for this request (the live variant, the longer one). */
function windowsArgv(tool: AgentTool, params: RunParams, wslBin: string): [string, string[]] {
  const agentArgs = tool.agentArgs(params.task, true)
  if (!runsInWsl(params, 'win32')) return [tool.bin, agentArgs]
  const { file, args } = wslCommand(wslTarget(params, wslBin), SAMPLE_RUN_ID, tool.bin, agentArgs)
  return [file, args]
}

/**
 * What a Windows host must refuse before anything runs: a cwd wsl.exe would misread, a distro that does not exist, a
 * command line longer than Windows carries (a 400 for the task's length, not a failed spawn).
 */
export async function assertRunnableOnWindows(tool: AgentTool, params: RunParams, wslBin: string, distros: WslDistros): Promise<void> {
  if (runsInWsl(params, 'win32')) {
    const problem = params.cwd === undefined ? null : wslCwdProblem(params.cwd)
    if (problem !== null) throw new WslArgumentUnsafe(problem)
  }
  const length = windowsCommandLine(...windowsArgv(tool, params, wslBin)).length
  if (length > WINDOWS_COMMAND_LINE_MAX) throw new CommandLineTooLong(length, WINDOWS_COMMAND_LINE_MAX)
  if (runsInWsl(params, 'win32') && (await distros.exists(params.wsl_distro!)) === false) {
    throw new WslDistroNotFound(params.wsl_distro!)
  }
}

import { serviceError } from '../errors.js'
import { WINDOWS_COMMAND_LINE_MAX, windowsCommandLine } from '../process/windows-command-line.js'
import type { WslDistros } from '../process/wsl-distros.js'
import type { Placement } from './placement.js'

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
 * What a Windows host must refuse before anything runs: a cwd wsl.exe would misread, a distro that does not exist, a
 * command line longer than Windows carries (a 400 for the task's length, not a failed spawn).
 */
export async function assertRunnableOnWindows(placement: Placement, distros: WslDistros): Promise<void> {
  const problem = placement.wsl === undefined ? null : wslCwdProblem(placement.wsl.cwd ?? '')
  if (problem !== null) throw serviceError('WSL_ARGUMENT_UNSAFE', problem)
  const length = windowsCommandLine(placement.command.file, placement.command.args).length
  if (length > WINDOWS_COMMAND_LINE_MAX) throw serviceError('COMMAND_LINE_TOO_LONG', length, WINDOWS_COMMAND_LINE_MAX)
  if (placement.wsl !== undefined && (await distros.exists(placement.wsl.distro)) === false) {
    throw serviceError('WSL_DISTRO_NOT_FOUND', placement.wsl.distro)
  }
}

import { serviceError } from '../errors.js'
import { WINDOWS_COMMAND_LINE_MAX, windowsCommandLine } from '../process/windows-command-line.js'
import type { WslDistros } from '../process/wsl-distros.js'
import { wslCwdProblem, type Placement } from './placement.js'

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

import { stat } from 'node:fs/promises'
import { serviceError } from '../errors.js'

/** Fails with a 400 before any slot or process when the host directory the agent would run in is unusable. */
export async function assertHostDirectory(cwd: string): Promise<void> {
  let isDirectory: boolean
  try {
    isDirectory = (await stat(cwd)).isDirectory()
  } catch {
    // ENOENT, ENOTDIR on a parent, EACCES on a parent: from the caller's side the directory is not there.
    throw serviceError('CWD_NOT_FOUND', cwd)
  }
  if (!isDirectory) throw serviceError('CWD_NOT_A_DIRECTORY', cwd)
}

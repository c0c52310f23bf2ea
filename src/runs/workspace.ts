import { stat } from 'node:fs/promises'
import { serviceError } from '../errors.js'
import { pathAsUser, type AgentUser } from '../process/agent-user.js'

async function pathAsService(cwd: string): Promise<'directory' | 'not-directory' | 'missing'> {
  try {
    return (await stat(cwd)).isDirectory() ? 'directory' : 'not-directory'
  } catch {
    // ENOENT, ENOTDIR on a parent, EACCES on a parent: from the caller's side the directory is not there.
    return 'missing'
  }
}

/**
 * Fails with a 400 before any slot or process when the host directory the agent would run in is unusable, as seen by
 * whoever the agent runs as (AGENT_USER: a directory that user cannot enter is not there, whatever root sees).
 */
export async function assertHostDirectory(cwd: string, user?: AgentUser): Promise<void> {
  const seen = (user === undefined ? undefined : await pathAsUser(cwd, user)) ?? (await pathAsService(cwd))
  if (seen === 'missing') throw serviceError('CWD_NOT_FOUND', cwd)
  if (seen === 'not-directory') throw serviceError('CWD_NOT_A_DIRECTORY', cwd)
}

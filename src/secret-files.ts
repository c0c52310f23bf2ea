import { statSync, type Stats } from 'node:fs'
import type { AgentUser } from './process/agent-user.js'

/** What the files holding the service's secrets let others read, found at start. */
export interface SecretFilesCheck {
  /** Readable by a group agents are not known to be in: said at start and in /readyz, with the fix. */
  exposed: string[]
}

type FileMode = Pick<Stats, 'mode' | 'uid' | 'gid'>

interface SecretFileProblem {
  severity: 'refuse' | 'warn'
  message: string
}

/**
 * Why `file` would hand its secrets to an agent, or to every local user: `refuse` when an agent can read it for sure
 * (other users may, or it is the agent user's, or in a group of its), `warn` when some group may; null when only its
 * owner reads it.
 */
export function secretFileProblem(
  file: string,
  stat: FileMode,
  agentUser: Pick<AgentUser, 'uid' | 'groups'> | undefined
): SecretFileProblem | null {
  const mode = `mode ${(stat.mode & 0o777).toString(8)}`
  const fix = `chmod 600 ${file}`
  const refuse = (message: string): SecretFileProblem => ({ severity: 'refuse', message })
  if ((stat.mode & 0o004) !== 0) {
    return refuse(`${file} is readable by every local user, agents included (${mode}): ${fix}`)
  }
  if (agentUser !== undefined && stat.uid === agentUser.uid) {
    return refuse(`${file} belongs to AGENT_USER, whose agents may read and change it: give it to the service's user`)
  }
  if ((stat.mode & 0o040) === 0) return null
  const group = `group ${String(stat.gid)}`
  if (agentUser?.groups.includes(stat.gid) === true) {
    return refuse(`${file} is readable by ${group}, AGENT_USER's (${mode}): ${fix}`)
  }
  const message = `${file}, readable by ${group} (${mode}): ${fix} unless that group is meant to read it`
  return { severity: 'warn', message }
}

/**
 * Refuses to start on a secret file an agent could read (throws, naming the fix); reports the ones a group may read.
 * Modes mean nothing on Windows, where nothing is checked.
 */
export function checkSecretFiles(files: string[], agentUser: AgentUser | undefined): SecretFilesCheck {
  const exposed: string[] = []
  if (process.platform === 'win32') return { exposed }
  for (const file of files) {
    const problem = secretFileProblem(file, statSync(file), agentUser)
    if (problem?.severity === 'refuse') throw new Error(problem.message)
    if (problem !== null) exposed.push(problem.message)
  }
  return { exposed }
}

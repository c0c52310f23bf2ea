import { execFile, execFileSync } from 'node:child_process'

/** The account agents run as, when the service (root) runs them as someone else. */
export interface AgentUser {
  name: string
  uid: number
  gid: number
  /** Every group it is in, its own first: what a file's group bits open to it. */
  groups: number[]
  home: string
  /** An account of the system's (AGENT_USER): its groups come from it; a token's own user (AGENT_USERS) has none. */
  listed: boolean
}

/** setpriv's groups for the user: its account's, or none but its own group. */
export const groupsOption = (user: AgentUser): string[] => user.listed ? ['--init-groups'] : ['--clear-groups']

/**
 * Looks the account up the way the system does (getent: /etc/passwd, LDAP…). Running agents as another user keeps the
 * service's memory (/proc/<pid>/environ with its tokens), its files and its data out of their reach.
 */
export function resolveAgentUser(name: string): AgentUser {
  if (process.platform !== 'linux') throw new Error(`AGENT_USER works on Linux hosts; this is ${process.platform}`)
  if (process.getuid!() !== 0) {
    throw new Error('AGENT_USER needs the service to run as root, to start agents as that user')
  }
  let entry: string
  try {
    entry = execFileSync('getent', ['passwd', name], { encoding: 'utf8' }).trim()
  } catch {
    throw new Error(`AGENT_USER=${name}: no such user (getent passwd ${name})`)
  }
  const [account, , uid, gid, , home] = entry.split(':')
  if (Number(uid) === 0) throw new Error(`AGENT_USER=${name} is root: agents would reach the service as before`)
  const groups = groupsOf(account!, Number(gid))
  return { name: account!, uid: Number(uid), gid: Number(gid), groups, home: home!, listed: true }
}

/** The user's groups as the system lists them (`id -G`: /etc/group, LDAP…); its own group when it cannot tell. */
function groupsOf(name: string, gid: number): number[] {
  try {
    const listed = execFileSync('id', ['-G', name], { encoding: 'utf8' }).trim().split(/\s+/).map(Number)
    return [...new Set([gid, ...listed.filter(Number.isInteger)])]
  } catch {
    return [gid]
  }
}

/**
 * Variables that name where a CLI keeps its state instead of under HOME: given once for the service, they would send
 * every token's agents to one directory, a token's own user finds its CLIs' state in its own home only.
 */
const STATE_DIRECTORIES = [
  'XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME', 'XDG_CACHE_HOME', 'XDG_RUNTIME_DIR',
  'CLAUDE_CONFIG_DIR', 'CODEX_HOME', 'GEMINI_CLI_HOME', 'OPENCODE_CONFIG_DIR', 'OPENCODE_CONFIG'
]

/** The agent's own identity in its environment, so its tools write under its home, not the service's. */
export function asAgentUser(env: NodeJS.ProcessEnv, user: AgentUser | undefined): NodeJS.ProcessEnv {
  if (user === undefined) return env
  const own = user.listed
    ? env
    : Object.fromEntries(Object.entries(env).filter(([name]) => !STATE_DIRECTORIES.includes(name)))
  return { ...own, HOME: user.home, USER: user.name, LOGNAME: user.name }
}

/** What a path is to a user: fixed text, the path one of its positional parameters, never read as shell syntax. */
const LOOK_SCRIPT = '[ -d "$1" ] && [ -x "$1" ] && exit 0; [ -e "$1" ] && [ ! -d "$1" ] && exit 3; exit 2'

/**
 * What `path` is to `user` (with its groups), looked at as that user: a directory it may enter, something else, or
 * nothing it can see. The service (root) sees everything; asking as itself would tell a caller which root-only paths
 * exist. undefined when util-linux's setpriv is not there to ask with.
 */
export function pathAsUser(
  path: string,
  user: AgentUser
): Promise<'directory' | 'not-directory' | 'missing' | undefined> {
  const identity = ['--reuid', String(user.uid), '--regid', String(user.gid), ...groupsOption(user)]
  const args = [...identity, '--', 'sh', '-c', LOOK_SCRIPT, 'sh', path]
  return new Promise((resolve) => {
    execFile('setpriv', args, { timeout: 5000 }, (error) => {
      if (error === null) return resolve('directory')
      // execFile puts the exit status in `code` (a number), and spawn's own failure there (a string: ENOENT).
      const status: unknown = error.code
      resolve(status === 3 ? 'not-directory' : status === 2 ? 'missing' : undefined)
    })
  })
}

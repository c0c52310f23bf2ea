import { closeSync, constants, fchownSync, fstatSync, lstatSync, mkdirSync, openSync } from 'node:fs'
import type { AgentUser } from './agent-user.js'

/**
 * Makes AGENT_WORKDIR ready for agents: created 0700 when missing, given to AGENT_USER. A directory that is a symbolic
 * link, or that belongs to anyone but the service or AGENT_USER, is refused: someone else could have put there what
 * steers an agent (a CLAUDE.md, an AGENTS.md), or pointed it at a directory the service would then hand over. The
 * ownership change goes through a descriptor opened without following links, so a link swapped in meanwhile is never
 * followed.
 */
export function prepareWorkdir(dir: string, user: AgentUser | undefined): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  if (process.platform === 'win32') return
  if (lstatSync(dir).isSymbolicLink()) {
    throw new Error(`AGENT_WORKDIR ${dir} is a symbolic link: name the directory it points to, if it is meant`)
  }
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW)
  try {
    const owner = fstatSync(fd).uid
    const allowed = [process.getuid!(), ...(user === undefined ? [] : [user.uid])]
    if (!allowed.includes(owner)) {
      throw new Error(
        `AGENT_WORKDIR ${dir} belongs to uid ${String(owner)}, not to the service or AGENT_USER: ` +
        'whoever owns it decides what agents find there'
      )
    }
    if (user !== undefined) fchownSync(fd, user.uid, user.gid)
  } finally {
    closeSync(fd)
  }
}

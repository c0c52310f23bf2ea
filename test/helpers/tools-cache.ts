import { homedir } from 'node:os'
import { join } from 'node:path'

/**
 * Where what the suites fetch or make once is kept (real CLIs, validators, the Wine prefix, other Nodes): outside the
 * work tree, so that every clone on a machine, CI's fresh one included, shares one copy. As root, a directory every
 * user can reach: the real CLIs also run as AGENT_USER, who cannot enter root's home. scripts/with-node.sh reads the
 * same three places.
 */
export const TOOLS_CACHE = process.env['XDG_CACHE_HOME'] !== undefined
  ? join(process.env['XDG_CACHE_HOME'], 'agent-runner')
  : process.getuid?.() === 0
    ? '/var/cache/agent-runner'
    : join(homedir(), '.cache', 'agent-runner')

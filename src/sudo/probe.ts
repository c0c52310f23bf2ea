import { spawn } from 'node:child_process'
import { LRUCache } from 'lru-cache'
import { withWslEnv } from '../agents/environment.js'
import type { AgentUser } from '../process/agent-user.js'
import { findOnPath } from '../process/find-executable.js'
import { wslProcessEnv } from '../process/wsl-group.js'
import type { SudoStatus } from '../schemas/run.js'

/** Where the agent will run: on the host with its PATH, or inside a WSL distro as a user. */
export type SudoContext =
  | { kind: 'host'; path: string; user?: AgentUser | undefined }
  | { kind: 'wsl'; wslBin: string; distro: string; user: string | undefined }

/**
 * A probe that hangs (a sudo misconfigured to wait) must not hold the run: past this it counts as needing a
 * password.
 */
const PROBE_TIMEOUT_MS = 10_000

/**
 * Inside the distro, one fixed script (no request data in it) answers both questions: is sudo on the distro's PATH,
 * and does it work without a password. 127 is the shell's own "not found" status.
 */
const WSL_PROBE_SCRIPT = 'command -v sudo >/dev/null 2>&1 || exit 127; exec sudo -n true'

/** sudo's first words, enough to tell why it refused: what it says is a line. */
const PROBE_STDERR_MAX_CHARS = 1024

/** sudo refuses a uid with no passwd entry before any password (a token's user under AGENT_USERS has none). */
const UNKNOWN_USER = 'you do not exist in the passwd database'

interface ProbeEnd {
  /** null: the probe could not start, or was killed at its deadline. */
  code: number | null
  /** The start of what it printed on stderr. */
  said: string
}

/**
 * Runs a probe command with no stdin and no terminal (its own session), so sudo -n can only answer, never ask; in the
 * C locale, so that why sudo refused reads the same whatever the agent's language.
 */
async function probeEnd(
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  user?: { uid: number; gid: number }
): Promise<ProbeEnd> {
  const child = spawn(file, args, {
    env: { ...env, LC_ALL: 'C' },
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: process.platform !== 'win32',
    timeout: PROBE_TIMEOUT_MS,
    ...user
  })
  let said = ''
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    if (said.length < PROBE_STDERR_MAX_CHARS) said = (said + chunk).slice(0, PROBE_STDERR_MAX_CHARS)
  })
  return new Promise((resolve) => {
    child.once('error', () => resolve({ code: null, said }))
    child.once('close', (code) => resolve({ code, said }))
  })
}

function contextKey(context: SudoContext): string {
  return context.kind === 'host'
    ? `host\0${context.path}\0${context.user?.uid ?? ''}`
    : `wsl\0${context.distro}\0${context.user ?? ''}`
}

async function probeSudo(context: SudoContext, env: NodeJS.ProcessEnv): Promise<SudoStatus> {
  if (context.kind === 'host') {
    const sudo = await findOnPath('sudo', context.path)
    if (sudo === undefined) return 'not_installed'
    // As the agent will run it: AGENT_USER's sudo rights, not the service's.
    const user = context.user === undefined ? undefined : { uid: context.user.uid, gid: context.user.gid }
    const { code, said } = await probeEnd(sudo, ['-n', 'true'], env, user)
    if (code === 0) return 'passwordless'
    return said.includes(UNKNOWN_USER) ? 'unknown_user' : 'password_required'
  }
  const args = [
    '-d', context.distro,
    ...(context.user === undefined ? [] : ['-u', context.user]),
    '--exec', 'sh', '-c', WSL_PROBE_SCRIPT
  ]
  // The same environment as the agent's wsl.exe call, so the probe meets the sudo the agent will meet.
  const { code } = await probeEnd(context.wslBin, args, wslProcessEnv(withWslEnv(env)))
  // null: wsl itself could not start, so no sudo can be reached there (the run will report the missing wsl).
  if (code === 127 || code === null) return 'not_installed'
  return code === 0 ? 'passwordless' : 'password_required'
}

/**
 * The seed's NeedsSudoPassword, cached per context for a bounded time: sudoers rarely change, and a probe costs a
 * process (or a WSL round trip). Concurrent runs in one context share one probe.
 */
export class SudoProbe {
  readonly #cache: LRUCache<string, SudoStatus, { target: SudoContext }>

  constructor(ttlMs: number, env: NodeJS.ProcessEnv) {
    this.#cache = new LRUCache<string, SudoStatus, { target: SudoContext }>({
      max: 256,
      ttl: ttlMs,
      fetchMethod: (_key, _stale, { context }) => probeSudo(context.target, env)
    })
  }

  async status(target: SudoContext): Promise<SudoStatus> {
    return (await this.#cache.fetch(contextKey(target), { context: { target } }))!
  }
}

import { spawn, type ChildProcess } from 'node:child_process'
import { asAgentUser, type AgentUser } from '../process/agent-user.js'
import type { Command } from '../process/containment.js'
import { resolveWindowsCommand } from '../process/windows-executable.js'

/** What `<file> --version` starts: on Windows an npm .cmd shim cannot be spawned without a shell, so its target is. */
async function versionCommand(file: string, env: NodeJS.ProcessEnv): Promise<Command | undefined> {
  if (process.platform !== 'win32') return { file, args: ['--version'] }
  return resolveWindowsCommand(file, ['--version'], env, process.cwd()).catch(() => undefined)
}

/**
 * How a probe is tied to the service: `signal` ends it when the service closes, `bind` when the service dies. `user`:
 * AGENT_USER, whom the probe runs as, as the agent will: a CLI run as root with the agent's HOME would leave files
 * there (a log, a database) that the agent then may not open.
 */
export interface ProbeOwner {
  signal: AbortSignal
  bind: (command: Command) => Command
  user?: AgentUser | undefined
}

/**
 * How long a CLI may take to say its version. gemini relaunches itself in a second Node with a larger heap before it
 * answers: seconds on a loaded machine.
 */
const VERSION_TIMEOUT_MS = 15_000

/** What a probe may print before it is cut off: a version is one line. */
const VERSION_OUTPUT_MAX = 64 * 1024

/**
 * Ends a probe and whatever it started: where processes have groups the probe leads its own, so a CLI that relaunched
 * itself (gemini) goes with it; on Windows, the probe alone.
 */
function killProbe(child: ChildProcess): void {
  try {
    if (process.platform !== 'win32' && child.pid !== undefined) process.kill(-child.pid, 'SIGKILL')
    else child.kill('SIGKILL')
  } catch {
    // Gone already.
  }
}

/**
 * First line of `<bin> --version`, or null when the binary does not answer it in time. A probe that outlived the
 * service (or its own deadline) would be a process nobody stops: it and what it started are ended with it.
 */
export async function versionOf(
  file: string,
  env: NodeJS.ProcessEnv,
  owner: ProbeOwner,
  timeoutMs = VERSION_TIMEOUT_MS
): Promise<string | null> {
  const { signal, user } = owner
  const found = await versionCommand(file, env)
  if (found === undefined || signal.aborted) return null
  const command = owner.bind(found)
  const child = spawn(command.file, command.args, {
    env: asAgentUser(env, user),
    stdio: ['ignore', 'pipe', 'ignore'],
    detached: process.platform !== 'win32',
    windowsHide: true,
    ...(user === undefined ? {} : { uid: user.uid, gid: user.gid })
  })
  let printed = ''
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    printed += text
    if (printed.length > VERSION_OUTPUT_MAX) killProbe(child)
  })
  const end = (): void => killProbe(child)
  const timer = setTimeout(end, timeoutMs)
  signal.addEventListener('abort', end, { once: true })
  // 'close': the exit and the output both in; or an 'error': it could not start (no such file, not executable).
  const code = await new Promise<number | null>((resolve) => {
    child.once('close', resolve)
    child.once('error', () => resolve(null))
  })
  clearTimeout(timer)
  signal.removeEventListener('abort', end)
  // Whatever it started and left (a relaunched CLI's own children) goes with it.
  killProbe(child)
  const firstLine = printed.split('\n')[0]?.trim()
  return code !== 0 || !firstLine ? null : firstLine
}

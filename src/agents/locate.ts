import { execFile } from 'node:child_process'
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
 * First line of `<bin> --version`, or null when the binary does not answer it within a few seconds. A probe that
 * outlived the service would be a process nobody stops: its owner ends it.
 */
export async function versionOf(file: string, env: NodeJS.ProcessEnv, owner: ProbeOwner): Promise<string | null> {
  const { signal } = owner
  const found = await versionCommand(file, env)
  if (found === undefined || signal.aborted) return null
  const command = owner.bind(found)
  return new Promise((resolve) => {
    // A version probe holds no work worth a grace period: SIGKILL also ends a CLI that traps SIGTERM.
    const { user } = owner
    const options = {
      env: asAgentUser(env, user),
      signal,
      timeout: 5000,
      killSignal: 'SIGKILL' as const,
      maxBuffer: 64 * 1024,
      windowsHide: true,
      ...(user === undefined ? {} : { uid: user.uid, gid: user.gid })
    }
    execFile(command.file, command.args, options, (error, stdout) => {
      const firstLine = stdout.split('\n')[0]?.trim()
      resolve(error || !firstLine ? null : firstLine)
    })
  })
}

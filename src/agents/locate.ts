import { execFile } from 'node:child_process'
import { resolveWindowsCommand } from '../process/windows-executable.js'

/** What `<file> --version` starts: on Windows an npm .cmd shim cannot be spawned without a shell, so its target is. */
async function versionCommand(
  file: string,
  env: NodeJS.ProcessEnv
): Promise<{ file: string; args: string[] } | undefined> {
  if (process.platform !== 'win32') return { file, args: ['--version'] }
  return resolveWindowsCommand(file, ['--version'], env, process.cwd()).catch(() => undefined)
}

/**
 * First line of `<bin> --version`, or null when the binary does not answer it within a few seconds. `signal` ends
 * the probe with its owner: a probe that outlived the service would be a process nobody stops.
 */
export async function versionOf(file: string, env: NodeJS.ProcessEnv, signal: AbortSignal): Promise<string | null> {
  const command = await versionCommand(file, env)
  if (command === undefined || signal.aborted) return null
  return new Promise((resolve) => {
    // A version probe holds no work worth a grace period: SIGKILL also ends a CLI that traps SIGTERM.
    const options = {
      env, signal, timeout: 5000, killSignal: 'SIGKILL' as const, maxBuffer: 64 * 1024, windowsHide: true
    }
    execFile(command.file, command.args, options, (error, stdout) => {
      const firstLine = stdout.split('\n')[0]?.trim()
      resolve(error || !firstLine ? null : firstLine)
    })
  })
}

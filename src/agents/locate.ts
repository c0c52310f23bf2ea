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

/** First line of `<bin> --version`, or null when the binary does not answer it within a few seconds. */
export async function versionOf(file: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  const command = await versionCommand(file, env)
  if (command === undefined) return null
  return new Promise((resolve) => {
    const options = { env, timeout: 5000, maxBuffer: 64 * 1024, windowsHide: true }
    execFile(command.file, command.args, options, (error, stdout) => {
      const firstLine = stdout.split('\n')[0]?.trim()
      resolve(error || !firstLine ? null : firstLine)
    })
  })
}

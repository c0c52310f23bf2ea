import { execFile } from 'node:child_process'
import { constants } from 'node:fs'
import { access } from 'node:fs/promises'
import { delimiter, isAbsolute, join } from 'node:path'

/** The executable a spawn with this PATH would run, looked up the way execvp does; undefined when there is none. */
export async function findOnPath(name: string, path: string): Promise<string | undefined> {
  const candidates = isAbsolute(name) || name.includes('/') ? [name] : path.split(delimiter).filter(Boolean).map((dir) => join(dir, name))
  for (const candidate of candidates) {
    try {
      await access(candidate, constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

/** First line of `<bin> --version`, or null when the binary does not answer it within a few seconds. */
export function versionOf(file: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  return new Promise((resolve) => {
    execFile(file, ['--version'], { env, timeout: 5000, maxBuffer: 64 * 1024 }, (error, stdout) => {
      const firstLine = stdout.split('\n')[0]?.trim()
      resolve(error || !firstLine ? null : firstLine)
    })
  })
}

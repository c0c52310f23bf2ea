import { execFile } from 'node:child_process'

/** First line of `<bin> --version`, or null when the binary does not answer it within a few seconds. */
export function versionOf(file: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  return new Promise((resolve) => {
    execFile(file, ['--version'], { env, timeout: 5000, maxBuffer: 64 * 1024 }, (error, stdout) => {
      const firstLine = stdout.split('\n')[0]?.trim()
      resolve(error || !firstLine ? null : firstLine)
    })
  })
}

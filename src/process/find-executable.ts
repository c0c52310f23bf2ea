import { accessSync, constants } from 'node:fs'
import { delimiter, isAbsolute, join, resolve } from 'node:path'
import { AgentSpawnError } from './spawn-error.js'
import { findWindowsExecutable } from './windows-executable.js'

/**
 * The executable a spawn with this PATH would run, looked up the way execvp does (a name with a slash is a path,
 * relative to `cwd`); undefined when there is none.
 */
export async function findOnPath(name: string, path: string, cwd = process.cwd()): Promise<string | undefined> {
  // Windows finds `claude` as `claude.cmd` through PATHEXT, and PATH is `;`-separated.
  if (process.platform === 'win32') {
    return findWindowsExecutable(name, path, process.env['PATHEXT'] ?? '.COM;.EXE;.BAT;.CMD', cwd)
  }
  const candidates = isAbsolute(name) || name.includes('/')
    ? [resolve(cwd, name)]
    : path.split(delimiter).filter(Boolean).map((dir) => join(dir, name))
  for (const candidate of candidates) {
    try {
      // Synchronous, as execvp looks: a cached directory entry answers in microseconds, where each asynchronous check
      // is a trip through libuv's thread pool, and every run looks up its agent and sudo.
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

/**
 * Refuses an agent a wrapper (prlimit, the namespace chain) would start and only then fail to find: said before, the
 * way spawn itself would have.
 */
export async function assertFoundBeforeWrapper(file: string, env: NodeJS.ProcessEnv, cwd?: string): Promise<void> {
  if ((await findOnPath(file, env['PATH'] ?? '', cwd)) === undefined) throw AgentSpawnError.notFound(file)
}

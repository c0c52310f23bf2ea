import { execFile } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

/** Outside the work tree, so that every clone on a machine (CI's among them) shares one download of each version. */
const CACHE = join(process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'agent-runner', 'npm-tools')

/**
 * A test-only program from npm at a pinned version (a real agent CLI, a validator), installed on first use into a
 * cache of its own rather than as a dependency: the quick start's `npm ci` never downloads it. Returns its binary.
 */
export async function npmTool(pkg: string, version: string, bin: string): Promise<string> {
  const dir = join(CACHE, `${pkg.replace('/', '+')}@${version}`)
  const path = join(dir, 'node_modules', '.bin', bin)
  if (existsSync(path)) return path
  mkdirSync(dir, { recursive: true })
  await promisify(execFile)('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', '--silent', `${pkg}@${version}`], { maxBuffer: 16 << 20 })
  return path
}

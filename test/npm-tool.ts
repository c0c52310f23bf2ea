import { execFile } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const CACHE = fileURLToPath(new URL('../node_modules/.cache/npm-tools', import.meta.url))

/**
 * A test-only program from npm at a pinned version (a real agent CLI, a validator), installed on first use into
 * node_modules/.cache rather than as a dependency: the quick start's `npm ci` never downloads it. Returns its binary.
 */
export async function npmTool(pkg: string, version: string, bin: string): Promise<string> {
  const dir = join(CACHE, `${pkg.replace('/', '+')}@${version}`)
  const path = join(dir, 'node_modules', '.bin', bin)
  if (existsSync(path)) return path
  mkdirSync(dir, { recursive: true })
  await promisify(execFile)('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', '--silent', `${pkg}@${version}`], { maxBuffer: 16 << 20 })
  return path
}

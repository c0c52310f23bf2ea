import { execFile } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { TOOLS_CACHE } from './tools-cache.js'

const CACHE = join(TOOLS_CACHE, 'npm-tools')

/**
 * A test-only program from npm at a pinned version (a real agent CLI, a validator), installed on first use into a
 * cache of its own rather than as a dependency: the quick start's `npm ci` never downloads it. Returns its binary.
 * Test files run side by side and may ask for the same one: each installs beside it and moves it into place in one
 * rename, so nobody ever sees half an install.
 */
export async function npmTool(pkg: string, version: string, bin: string, peers: string[] = []): Promise<string> {
  // Peers pinned beside it (a code generator's TypeScript): npm would otherwise pick their newest.
  const dir = join(CACHE, [`${pkg}@${version}`, ...peers].join('+').replaceAll('/', '+'))
  const path = join(dir, 'node_modules', '.bin', bin)
  if (existsSync(path)) return path
  mkdirSync(CACHE, { recursive: true, mode: 0o755 })
  const staging = mkdtempSync(`${dir}.installing-`)
  chmodSync(staging, 0o755)
  try {
    await promisify(execFile)(
      'npm', ['install', '--prefix', staging, '--no-audit', '--no-fund', '--silent', `${pkg}@${version}`, ...peers],
      { maxBuffer: 16 << 20 }
    )
    renameSync(staging, dir)
  } catch (error) {
    if (!existsSync(path)) throw error
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
  return path
}

import { execFile } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

/**
 * Outside the work tree, so that every clone on a machine (CI's among them) shares one download of each version. As
 * root, a directory every user can reach: the real CLIs also run as AGENT_USER, who cannot enter root's home.
 */
const CACHE = process.env['XDG_CACHE_HOME'] !== undefined
  ? join(process.env['XDG_CACHE_HOME'], 'agent-runner', 'npm-tools')
  : process.getuid?.() === 0
    ? '/var/cache/agent-runner/npm-tools'
    : join(homedir(), '.cache', 'agent-runner', 'npm-tools')

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

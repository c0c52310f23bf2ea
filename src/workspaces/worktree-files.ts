import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { chown, lstat, mkdir, rm, rmdir } from 'node:fs/promises'
import { posix } from 'node:path'
import { wslExecArgs, wslProcessEnv } from '../process/wsl-group.js'
import { isWslUser, type GitUser, type WslUser } from './git.js'

/** What the service does to a worktree's directory besides git: where git's user keeps it, on this host or a distro. */
export interface WorktreeFiles {
  /** A new directory (0700, failing if it exists), the user's own. */
  makePrivate(path: string): Promise<void>
  /** Gone, with whatever it holds; a symlink is removed, never followed. */
  remove(path: string): Promise<void>
  exists(path: string): Promise<boolean>
  /** A directory itself, not a symlink to one. */
  isDirectory(path: string): Promise<boolean>
}

const execFileAsync = promisify(execFile)

/** A tree of many files takes seconds to delete; this only stops a runaway. */
const EMPTYING_TIMEOUT_MS = 120_000

/**
 * Gone, whoever owns it: a directory of another uid (an agent's) is emptied by that uid itself, depth first and never
 * following a symlink (`find -P … -delete`), and only the empty directory is removed by the service; a walk by root
 * through a tree its agent can rearrange as it goes (a directory swapped for a symlink) could be led anywhere. What
 * the owner cannot delete (made by root through sudo) stays, and says so.
 */
export async function removeOwned(path: string): Promise<void> {
  const found = await lstat(path).catch(() => undefined)
  if (found === undefined) return
  if (!found.isDirectory() || found.uid === process.getuid?.()) {
    await rm(path, { recursive: true, force: true })
    return
  }
  await execFileAsync('find', ['-P', path, '-mindepth', '1', '-delete'], {
    uid: found.uid, gid: found.gid, cwd: '/', env: {}, timeout: EMPTYING_TIMEOUT_MS, maxBuffer: 64 * 1024
  }).catch(() => undefined)
  try {
    await rmdir(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return
    throw new Error(`${path} could not be emptied by its owner (uid ${String(found.uid)}): ` +
      (error as Error).message)
  }
}

const hostFiles = (user: Exclude<GitUser, WslUser>): WorktreeFiles => ({
  async makePrivate(path) {
    await mkdir(path, { mode: 0o700 })
    if (user !== undefined) await chown(path, user.uid, user.gid)
  },
  remove: removeOwned,
  exists: (path) => lstat(path).then(() => true, () => false),
  isDirectory: (path) => lstat(path).then((found) => found.isDirectory(), () => false)
})

/** A distro's round trip that hangs (a distro shutting down) must not hold a run forever. */
const WSL_CALL_TIMEOUT_MS = 60_000

/** Runs a program (never a shell with anything of a request in its script) inside the distro: its exit status. */
async function inDistro(wsl: WslUser, argv: readonly string[]): Promise<{ status: number; stdout: string }> {
  try {
    const { stdout } = await execFileAsync(wsl.wslBin, wslExecArgs(wsl, '/', argv), {
      env: wslProcessEnv(process.env), windowsHide: true, timeout: WSL_CALL_TIMEOUT_MS, maxBuffer: 64 * 1024
    })
    return { status: 0, stdout }
  } catch (error) {
    const { code } = error as { code?: unknown }
    // Not started at all, or stopped by its timeout: no answer from the distro.
    if (typeof code !== 'number') throw error
    return { status: code, stdout: '' }
  }
}

async function mustSucceed(wsl: WslUser, argv: readonly string[]): Promise<string> {
  const { status, stdout } = await inDistro(wsl, argv)
  if (status !== 0) throw new Error(`${argv[0]!} failed inside ${wsl.distro} (exit ${String(status)})`)
  return stdout
}

/** Paths arrive as positional parameters of a fixed script, read by no shell as code. */
const IS_DIRECTORY = '[ -d "$1" ] && [ ! -L "$1" ]'
const EXISTS = '[ -e "$1" ] || [ -L "$1" ]'

const distroFiles = (wsl: WslUser): WorktreeFiles => ({
  makePrivate: async (path) => { await mustSucceed(wsl, ['mkdir', '-m', '0700', '--', path]) },
  remove: async (path) => { await mustSucceed(wsl, ['rm', '-rf', '--', path]) },
  exists: async (path) => (await inDistro(wsl, ['sh', '-c', EXISTS, 'sh', path])).status === 0,
  isDirectory: async (path) => (await inDistro(wsl, ['sh', '-c', IS_DIRECTORY, 'sh', path])).status === 0
})

export const worktreeFiles = (user: GitUser): WorktreeFiles => isWslUser(user) ? distroFiles(user) : hostFiles(user)

/** Fixed text: where a distro user's worktrees go, made private to them, printed back with HOME resolved. */
const DISTRO_ROOT_SCRIPT = 'd="$HOME/.agent-runner/worktrees" && mkdir -p -m 0700 "$d" && printf %s "$d"'

/**
 * Inside a distro every worktree is its user's, under their own HOME (`~/.agent-runner/worktrees`): the service's
 * DATA_DIR is a Windows directory, and a worktree under /mnt would run git through the 9P bridge.
 */
export async function distroWorktreesRoot(wsl: WslUser): Promise<string> {
  const root = await mustSucceed(wsl, ['sh', '-c', DISTRO_ROOT_SCRIPT])
  if (!posix.isAbsolute(root)) throw new Error(`no home directory for the worktrees inside ${wsl.distro}`)
  return root
}

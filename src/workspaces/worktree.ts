import { lstat, mkdir, readdir } from 'node:fs/promises'
import { join, posix } from 'node:path'
import { filterOverrides, git, GitFailed, type GitCall, type GitUser, isWslUser, text } from './git.js'
import { removeOwned, worktreeFiles } from './worktree-files.js'

/** The run's `cwd` is in no repository git can use (400 NOT_A_GIT_REPOSITORY). */
export class NotAGitRepository extends Error {
  readonly code = 'NOT_A_GIT_REPOSITORY'
  constructor(cwd: string, detail: string) {
    super(`${cwd} is not in a git repository: ${detail.trim()}`)
    this.name = 'NotAGitRepository'
  }
}

/** The run's `base` names no commit of the repository (400 BASE_NOT_FOUND). */
export class BaseNotFound extends Error {
  readonly code = 'BASE_NOT_FOUND'
  constructor(base: string) {
    super(`base ${JSON.stringify(base)} names no commit of the repository`)
    this.name = 'BaseNotFound'
  }
}

export interface Repository {
  /** The caller's working tree: where its git commands run. */
  topLevel: string
  /** Its git directory, shared by all its worktrees. */
  commonDir: string
}

/** A run's own worktree: detached at `base`, in a directory of its own, its identity's alone. */
export interface Worktree {
  path: string
  /** Its private git directory (`<common dir>/worktrees/<name>`), learnt when it was made, before any agent ran. */
  gitDir: string
  repository: Repository
  base: string
  identity: GitUser
}

/** The directory and its ancestors: whichever of them git finds the repository at may be used as the identity. */
function selfAndAncestors(dir: string): string[] {
  const dirs = [dir]
  while (posix.dirname(dirs.at(-1)!) !== dirs.at(-1)) dirs.push(posix.dirname(dirs.at(-1)!))
  return dirs
}

/** Where in its repository a directory is. */
export interface RepositoryPlace {
  repository: Repository
  /** The directory relative to the top level (`src/` , or empty at the top): where an agent works in a worktree. */
  prefix: string
}

/** The repository `cwd` (absolute) is in, as the identity sees it, and where in it `cwd` is. */
export async function resolveRepository(cwd: string, identity?: GitUser): Promise<RepositoryPlace> {
  let lines: string[]
  try {
    lines = text(await git(['rev-parse', '--path-format=absolute', '--show-toplevel', '--git-common-dir',
      '--show-prefix'], { cwd, identity, safe: selfAndAncestors(cwd) })).split('\n')
  } catch (error) {
    if (error instanceof GitFailed && error.exitCode === 128) throw new NotAGitRepository(cwd, error.stderr)
    throw error
  }
  return { repository: { topLevel: lines[0]!, commonDir: lines[1]! }, prefix: lines[2] ?? '' }
}

/** The call that runs in the caller's repository. */
export const inRepository = (repository: Repository, identity: GitUser): GitCall =>
  ({ cwd: repository.topLevel, identity, safe: [repository.topLevel] })

/** The call that runs in a worktree: its git directory named, never found through the `.git` file its agent owns. */
export const inWorktree = (worktree: Worktree): GitCall => ({
  cwd: worktree.path,
  identity: worktree.identity,
  safe: [worktree.path],
  env: { GIT_DIR: worktree.gitDir, GIT_WORK_TREE: worktree.path }
})

/** The commit `base` names: always a revision, never an option (`--upload-pack=…` is a name here). */
export async function resolveBase(repository: Repository, base: string, identity?: GitUser): Promise<string> {
  try {
    return text(await git(['rev-parse', '--verify', '--end-of-options', `${base}^{commit}`],
      inRepository(repository, identity)))
  } catch (error) {
    if (error instanceof GitFailed && error.exitCode === 128) throw new BaseNotFound(base)
    throw error
  }
}

/** A run id names a directory: one path component, nothing git or a shell reads specially. */
const WORKTREE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/

export interface NewWorktree {
  repository: Repository
  /** A commit's full name, as resolveBase gives it. */
  base: string
  /** Where every run's worktree is made: DATA_DIR's, or WORKTREES_DIR. */
  root: string
  runId: string
  identity?: GitUser
}

/** Where a run's worktree goes: one path component under the root, checked, since it names a directory. */
export function worktreePath(root: string, runId: string): string {
  if (!WORKTREE_NAME.test(runId)) throw new Error(`not a worktree name: ${JSON.stringify(runId)}`)
  return posix.join(root, runId)
}

/**
 * A detached worktree at `base` in `<root>/<run id>` (0700, the identity's), made by git run as the identity from
 * the caller's repository: its working tree, index and branches untouched, no hook, filter or fsmonitor run (those
 * its own git directory's config names included). A
 * distro's root is its user's own already; this host's is made here, crossable by each agent user.
 */
export async function addWorktree({ repository, base, root, runId, identity }: NewWorktree): Promise<Worktree> {
  const path = worktreePath(root, runId)
  if (!isWslUser(identity)) await mkdir(root, { recursive: true, mode: 0o711 })
  const files = worktreeFiles(identity)
  await files.makePrivate(path)
  try {
    // Made without its files first: a repository's config may define a filter only for a worktree's git directory
    // ([includeIf "gitdir:**/worktrees/**"]), which the caller's repository does not see. The files are checked out
    // once the filters are read as that git directory reads its config, each made a no-op.
    await git(['worktree', 'add', '--no-checkout', '--detach', '--', path, base], inRepository(repository, identity))
    const gitDir = text(await git(['rev-parse', '--path-format=absolute', '--git-dir'], {
      cwd: path, identity, safe: [path]
    }))
    const worktree = { path, gitDir, repository, base, identity }
    const call = inWorktree(worktree)
    await git(['read-tree', '--reset', '-u', 'HEAD'], { ...call, config: await filterOverrides(call) })
    return worktree
  } catch (error) {
    await files.remove(path)
    await git(['worktree', 'prune'], inRepository(repository, identity)).catch(() => undefined)
    throw error
  }
}

/**
 * The worktree gone, and its entry in the caller's repository: git removes both (as the identity, which cannot
 * remove the directory itself from the service's root), the service what is left of the directory (rm never follows
 * a symlink), and a prune any entry left behind.
 */
export async function removeWorktree(worktree: Worktree): Promise<void> {
  const call = inRepository(worktree.repository, worktree.identity)
  await git(['worktree', 'remove', '--force', '--force', '--', worktree.path], call).catch(() => undefined)
  const files = worktreeFiles(worktree.identity)
  await files.remove(worktree.path)
  if (await files.exists(worktree.gitDir)) await git(['worktree', 'prune'], call)
}

/**
 * A worktree whose run ended while the service was down, found from the service's record of it (its git directory
 * not learnt yet, perhaps): its directory removed, its repository's entries pruned.
 */
export async function removeLeftover(path: string, repository: Repository, identity: GitUser): Promise<void> {
  await worktreeFiles(identity).remove(path)
  await git(['worktree', 'prune'], inRepository(repository, identity)).catch(() => undefined)
}

/**
 * At the service's start: the worktrees under `root` no live run owns (runs that ended while it was down) removed,
 * each as the user that owns its directory, and their repositories' entries pruned. Returns their names.
 */
export async function pruneWorktrees(root: string, live: ReadonlySet<string>): Promise<string[]> {
  const entries = await readdir(root, { withFileTypes: true }).catch(() => [])
  const pruned: string[] = []
  for (const entry of entries) {
    if (live.has(entry.name)) continue
    const path = join(root, entry.name)
    const owner = await lstat(path)
    const identity = owner.uid === process.getuid?.() ? undefined : { uid: owner.uid, gid: owner.gid }
    // Read from the leftover's `.git` file, which its agent could have rewritten: at worst another repository of
    // theirs is pruned, which only drops entries whose directories are gone.
    const commonDir = entry.isDirectory()
      ? await git(['rev-parse', '--path-format=absolute', '--git-common-dir'], {
        // a leftover without its `.git` file is in no repository, whatever repository holds the root
        cwd: path, identity, safe: [path], env: { GIT_CEILING_DIRECTORIES: root }
      }).then(text, () => undefined)
      : undefined
    // What its owner could not delete stays, and is tried again at the next start.
    const removed = await removeOwned(path).then(() => true, () => false)
    if (commonDir !== undefined) {
      await git(['worktree', 'prune'], { cwd: commonDir, identity, safe: [commonDir], env: { GIT_DIR: commonDir } })
        .catch(() => undefined)
    }
    if (removed) pruned.push(entry.name)
  }
  return pruned
}

import { open, type FileHandle } from 'node:fs/promises'
import { posix } from 'node:path'
import { Writable } from 'node:stream'
import { filterOverrides, git, type GitCall, text } from './git.js'
import { inWorktree, type Worktree } from './worktree.js'
import { type FileStatus, parseNumstat, parseRaw, ZFields } from './z-output.js'

export interface ChangedFile {
  path: string
  status: FileStatus
  old_path?: string
  additions: number
  deletions: number
  binary: boolean
}

/** What a run changed in its worktree since `base`: its commits and what it left uncommitted, tracked or not. */
export interface Changeset {
  base: string
  /** The worktree's HEAD when the agent committed (it moved from base), else null. */
  head: string | null
  files: ChangedFile[]
  /** The unified diff's first `diffLimitBytes` at most, cut at a line's end. */
  diff: string
  diff_bytes: number
  diff_truncated: boolean
}

export interface ChangesetOptions {
  diffLimitBytes: number
  /** Where the whole patch is written (a new file of the service's, 0600): what `GET /runs/{id}/diff` reads. */
  diffFile?: string
}

/** The paths of 10,000 files take a megabyte or so; this only stops a runaway. */
const FILE_LIST_LIMIT_BYTES = 64 * 1024 * 1024
/** The diff machinery's own options: no program a driver or config names, whatever the attributes say. */
const DIFF = ['diff-index', '--cached', '-M', '--no-ext-diff', '--no-textconv']

/**
 * The worktree's whole state in an index of its own (`GIT_INDEX_FILE`, in the worktree's private git directory, never
 * the caller's index nor the one its agent used): untracked files added, ignored ones not, filters neutral.
 */
export async function stageAll(worktree: Worktree): Promise<GitCall> {
  const call = inWorktree(worktree)
  const config = await filterOverrides(call)
  const index = posix.join(worktree.gitDir, 'agent-runner.index')
  const staged = { ...call, config, env: { ...call.env, GIT_INDEX_FILE: index } }
  // From the worktree's index, for its stat data (files it already knows unchanged are not read again), unless the
  // agent left it unusable (a merge in progress): then from HEAD alone, every file read once.
  await git(['read-tree', '-m', `--index-output=${index}`, 'HEAD'], { ...call, config })
    .catch(() => git(['read-tree', 'HEAD'], staged))
  await git(['add', '-A'], staged)
  return staged
}

/** The first `limit` bytes of what passes through, and all of it to a file when given, at the file's pace. */
class BoundedPatch extends Writable {
  private readonly head: Buffer[] = []
  private kept = 0
  total = 0

  constructor(private readonly limit: number, private readonly file?: FileHandle) {
    super()
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.total += chunk.length
    if (this.kept < this.limit) {
      const part = Buffer.from(chunk.subarray(0, this.limit - this.kept))
      this.head.push(part)
      this.kept += part.length
    }
    if (this.file === undefined) callback()
    else this.file.write(chunk).then(() => { callback() }, callback)
  }

  /** What is kept of the diff, as the changeset says it. */
  result(): Pick<Changeset, 'diff' | 'diff_bytes' | 'diff_truncated'> {
    return { ...truncatedDiff(Buffer.concat(this.head), this.total, this.limit), diff_bytes: this.total }
  }
}

/** The head of a diff within its limit: whole when it fits, else cut after its last complete line. */
export function truncatedDiff(head: Buffer, total: number, limit: number): { diff: string; diff_truncated: boolean } {
  if (total <= limit) return { diff: head.toString('utf8'), diff_truncated: false }
  const end = head.subarray(0, limit).lastIndexOf(0x0a)
  return { diff: head.subarray(0, end === -1 ? limit : end + 1).toString('utf8'), diff_truncated: true }
}

/** The files, one record each from the raw and the numstat outputs of one same diff. */
export function changedFiles(raw: readonly string[], numstat: readonly string[]): ChangedFile[] {
  const changes = parseRaw(raw)
  const counts = parseNumstat(numstat)
  if (changes.length !== counts.length) throw new Error('raw and numstat outputs list different files')
  return changes.map((change, i) => {
    const { path, oldPath, additions, deletions, binary } = counts[i]!
    if (path !== change.path || oldPath !== change.oldPath) throw new Error(`numstat and raw differ at ${path}`)
    return {
      path, status: change.status, ...(oldPath === undefined ? {} : { old_path: oldPath }), additions, deletions, binary
    }
  })
}

async function fields(args: readonly string[], call: GitCall): Promise<string[]> {
  const output = new ZFields(FILE_LIST_LIMIT_BYTES)
  await git(args, { ...call, output })
  return output.fields
}

/**
 * The changeset of a worktree against its base. Memory holds the file list and the diff's head only: the patch
 * streams to its file, whatever its size.
 */
export async function changeset(worktree: Worktree, { diffLimitBytes, diffFile }: ChangesetOptions):
Promise<Changeset> {
  const staged = await stageAll(worktree)
  const { base } = worktree
  const raw = await fields([...DIFF, '-z', '--raw', base, '--'], staged)
  const numstat = await fields([...DIFF, '-z', '--numstat', base, '--'], staged)
  const file = diffFile === undefined ? undefined : await open(diffFile, 'wx', 0o600)
  const patch = new BoundedPatch(diffLimitBytes, file)
  try {
    await git([...DIFF, '-p', '--binary', base, '--'], { ...staged, output: patch })
  } finally {
    await file?.close()
  }
  const head = text(await git(['rev-parse', '--verify', 'HEAD^{commit}'], inWorktree(worktree)))
  return { base, head: head === base ? null : head, files: changedFiles(raw, numstat), ...patch.result() }
}

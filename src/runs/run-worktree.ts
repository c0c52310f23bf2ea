import { createHash } from 'node:crypto'
import { createReadStream, type ReadStream } from 'node:fs'
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { join, posix } from 'node:path'
import { serviceError } from '../errors.js'
import type { RunParams } from '../schemas/run.js'
import type { Changes } from '../schemas/workspace.js'
import { changeset } from '../workspaces/changeset.js'
import { assertNewBranch, commitChanges, type Author } from '../workspaces/commit.js'
import { isWslUser, type GitUser, type WslUser } from '../workspaces/git.js'
import {
  addWorktree, inRepository, pruneWorktrees, removeLeftover, removeWorktree, resolveBase, resolveRepository,
  type Repository, type Worktree, worktreePath
} from '../workspaces/worktree.js'
import { distroWorktreesRoot, worktreeFiles } from '../workspaces/worktree-files.js'
import type { Placement } from './placement.js'
import type { Run } from './run.js'
import type { SessionRecord, SessionStore, SessionWorktree } from './stores/run-store.js'

export interface WorktreeSettings {
  /** WORKTREES_DIR: each run's worktree is `<dir>/<run id>`. */
  worktreesDir: string
  /** The service's own (under DATA_DIR): each caller's diffs, and a record of each worktree it manages. */
  stateDir: string
  diffLimitBytes: number
  /** How long a diff is served after its run: the runs' retention. */
  diffRetentionMs: number
  author: Author
  hostPlatform: NodeJS.Platform
  /** What reaches a distro's worktrees when the service sweeps them (WSL_BIN). */
  wslBin: string
  /** How often worktrees whose session expired, and diffs past retention, are looked for (default ten minutes). */
  sweepEveryMs?: number
}

/** Where the sweeps after the first say what they did. */
export interface SweepLog {
  warn: (details: object, message: string) => void
}

/** What a worktree run gets, decided (and refused) before it takes a slot. */
export interface WorktreePlan {
  identity: GitUser
  keep: 'never' | 'always'
  commit: RunParams['commit']
  /** Where in the worktree its agent works: the caller's cwd, relative to the repository's top. */
  prefix: string
  /** A new worktree's repository and base; or the worktree a resumed session left, continued. */
  source: { repository: Repository; base: string } | { continued: Worktree }
}

/** A worktree its run is using. */
export interface OpenWorktree {
  worktree: Worktree
  plan: WorktreePlan
  /** Where its agent starts. */
  cwd: string
}

/** What the service keeps of each worktree it made, until it removes it or gives it up (`keep: "always"`). */
interface WorktreeRecord {
  /** The session it continues in, once its run has ended; absent while its run runs (or if it crashed). */
  session?: { tool: string; id: string }
  /**
   * A worktree inside a WSL distro, which no listing of this host's directories finds: where it is, and the repository
   * whose entry goes with it.
   */
  distro?: { name: string; user: string | undefined; path: string; repository: Repository }
}

const SWEEP_EVERY_MS = 10 * 60_000

const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/

/**
 * git runs as the agent's user: on this host, its account's groups with it (a repository is often shared through one);
 * inside a distro, the distro user the run asked for.
 */
function gitUserOf({ user, wsl }: Pick<Placement, 'user' | 'wsl'>): GitUser {
  if (wsl !== undefined) return { wslBin: wsl.wslBin, distro: wsl.distro, user: wsl.user }
  if (user === undefined) return undefined
  return { uid: user.uid, gid: user.gid, ...(user.listed ? { groups: user.groups } : {}) }
}

/** What a record must say of a worktree for the sweep to find it again. */
function placeOf({ path, repository, identity }: Pick<Worktree, 'path' | 'repository' | 'identity'>): WorktreeRecord {
  return isWslUser(identity) ? { distro: { name: identity.distro, user: identity.user, path, repository } } : {}
}

/** A git refusal as the caller's error; anything else is the service's own failure. */
function asRefusal(error: unknown, params: Pick<RunParams, 'cwd' | 'base' | 'commit'>, cwd: string): unknown {
  switch ((error as { code?: unknown }).code) {
    case 'NOT_A_GIT_REPOSITORY': return serviceError('NOT_A_GIT_REPOSITORY', cwd)
    case 'BASE_NOT_FOUND': return serviceError('BASE_NOT_FOUND', params.base ?? 'HEAD')
    case 'GIT_NOT_INSTALLED': return serviceError('GIT_NOT_INSTALLED')
    case 'INVALID_BRANCH_NAME': return serviceError('INVALID_BRANCH_NAME', (error as Error).message)
    case 'BRANCH_EXISTS': return serviceError('BRANCH_EXISTS', params.commit?.branch ?? '')
    default: return error
  }
}

const toSessionWorktree = ({ path, gitDir, repository, base }: Worktree, prefix: string): SessionWorktree =>
  ({ path, gitDir, topLevel: repository.topLevel, commonDir: repository.commonDir, base, prefix })

const fromSessionWorktree = (kept: SessionWorktree, identity: GitUser): Worktree => ({
  path: kept.path,
  gitDir: kept.gitDir,
  repository: { topLevel: kept.topLevel, commonDir: kept.commonDir },
  base: kept.base,
  identity
})

/**
 * Worktree runs: each run's agent in a git worktree of its own, made from its caller's repository at `base`, and what
 * it changed there read back (a changeset, the whole diff kept for its caller, a branch when asked) before the worktree
 * goes — or stays, as long as the session its agent left, or for good when asked.
 */
export class RunWorktrees {
  readonly #settings: WorktreeSettings
  /** Worktrees whose runs are running now: never swept. */
  readonly #inUse = new Set<string>()
  #sweeper: NodeJS.Timeout | undefined
  /** The sweep under way, if any: sweeps run one after another, never two removing the same leftover. */
  #sweeping: Promise<unknown> = Promise.resolve()

  constructor(settings: WorktreeSettings) {
    this.#settings = settings
  }

  /**
   * The plan for a run asking for a worktree (or continuing a session that has one), each refusal before any slot:
   * options without a worktree, a place git cannot work yet (Windows itself), no repository, an unknown base, a branch
   * that could not be made.
   */
  async plan(params: RunParams, placement: Placement, session: SessionRecord | undefined):
  Promise<WorktreePlan | undefined> {
    const continued = session?.worktree
    if (params.workspace !== 'worktree' && continued === undefined) {
      for (const field of ['base', 'keep', 'commit'] as const) {
        if (params[field] !== undefined) {
          throw serviceError('VALIDATION_ERROR', `body/${field}: only for a run with workspace "worktree"`)
        }
      }
      return undefined
    }
    if (params.workspace === 'cwd') throw serviceError('RESUME_PLACE_MISMATCH', 'workspace', 'cwd', 'worktree')
    if (placement.wsl === undefined && this.#settings.hostPlatform === 'win32') {
      throw serviceError('WORKSPACE_NOT_SUPPORTED', 'on a Windows host outside WSL yet')
    }
    // Inside a distro the run's directory is its user's home unless it names one: the repository must be named.
    if (placement.wsl !== undefined && params.cwd === undefined && continued === undefined) {
      throw serviceError('VALIDATION_ERROR', 'body/cwd: a worktree run inside WSL names its repository\'s directory')
    }
    const identity = gitUserOf(placement)
    const cwd = placement.wsl?.cwd ?? placement.command.cwd!
    const decided = { identity, keep: params.keep ?? 'never', commit: params.commit } as const
    try {
      if (continued !== undefined) {
        if (params.base !== undefined && params.base !== continued.base) {
          throw serviceError('RESUME_PLACE_MISMATCH', 'base', params.base, continued.base)
        }
        // A session's worktree lives on the host (or in the distro) that made it, until the session expires.
        const found = await worktreeFiles(identity).isDirectory(continued.path)
        if (!found) throw serviceError('SESSION_NOT_FOUND', session!.id)
        const worktree = fromSessionWorktree(continued, identity)
        await this.#assertBranch(worktree.repository, params, identity)
        return { ...decided, prefix: continued.prefix, source: { continued: worktree } }
      }
      const { repository, prefix } = await resolveRepository(cwd, identity)
      const base = await resolveBase(repository, params.base ?? 'HEAD', identity)
      await this.#assertBranch(repository, params, identity)
      return { ...decided, prefix, source: { repository, base } }
    } catch (error) {
      throw asRefusal(error, params, cwd)
    }
  }

  /** The run's worktree, made (or the session's, taken up): where its agent works from now on. */
  async open(plan: WorktreePlan, run: Run): Promise<OpenWorktree> {
    const { source } = plan
    let worktree: Worktree
    if ('continued' in source) {
      worktree = source.continued
    } else {
      this.#inUse.add(run.id)
      try {
        const { identity } = plan
        const root = isWslUser(identity) ? await distroWorktreesRoot(identity) : this.#settings.worktreesDir
        const path = worktreePath(root, run.id)
        await this.#writeRecord(run.id, placeOf({ path, repository: source.repository, identity }))
        worktree = await addWorktree({ ...source, root, runId: run.id, identity })
      } catch (error) {
        await this.#forget(run.id)
        throw error
      }
    }
    this.#inUse.add(this.#nameOf(worktree))
    run.workIn({ kind: 'worktree', path: worktree.path, base: worktree.base })
    const inside = posix.join(worktree.path, plan.prefix)
    // The caller's directory may hold nothing tracked at base: the agent starts at the worktree's top then.
    const cwd = plan.prefix !== '' && (await worktreeFiles(worktree.identity).isDirectory(inside))
      ? inside
      : worktree.path
    return { worktree, plan, cwd }
  }

  /** The agent did not run, or its run failed: a new worktree goes at once, a session's stays with its session. */
  async discard(open: OpenWorktree): Promise<void> {
    const name = this.#nameOf(open.worktree)
    this.#inUse.delete(name)
    if ('continued' in open.plan.source) return
    await removeWorktree(open.worktree).catch(() => undefined)
    await this.#forget(name)
  }

  /**
   * What the agent changed, its whole diff kept for its caller, committed when asked. A failure here is the result's
   * (`changes.error`), never the run's: the agent's work is done and reported either way.
   */
  async changes(open: OpenWorktree, run: Run): Promise<Changes> {
    const { worktree, plan } = open
    const none = { head: null, files: [], diff: '', diff_bytes: 0, diff_truncated: false }
    let changes: Changes = { base: worktree.base, ...none, branch: null, worktree: worktree.path }
    try {
      const diffFile = await this.#newDiffFile(run.caller, run.id)
      const { diffLimitBytes } = this.#settings
      changes = { ...changes, ...(await changeset(worktree, { diffLimitBytes, diffFile })) }
      if (plan.commit !== undefined) {
        const made = await commitChanges(worktree, {
          runId: run.id, branch: plan.commit.branch, message: plan.commit.message, author: this.#settings.author
        })
        changes = { ...changes, branch: made.branch, head: made.head }
      }
    } catch (error) {
      changes = { ...changes, error: (error as Error).message }
    }
    return changes
  }

  /**
   * The worktree after its run: kept for the caller (`keep: "always"`), for the session the agent left (`session`), or
   * removed. Returns where it is, or null once gone.
   */
  async settle(open: OpenWorktree, session: { tool: string; id: string } | null): Promise<string | null> {
    const name = this.#nameOf(open.worktree)
    this.#inUse.delete(name)
    if (open.plan.keep === 'always') {
      // The caller's now: no longer the service's to remove.
      await this.#forget(name)
      return open.worktree.path
    }
    if (session !== null) {
      await this.#writeRecord(name, { ...placeOf(open.worktree), session })
      return open.worktree.path
    }
    // A session's worktree that this run continued stays as long as that session.
    if ('continued' in open.plan.source) return open.worktree.path
    try {
      await removeWorktree(open.worktree)
    } catch {
      // Its record says no session keeps it: the next sweep removes what is left. The run's result stands.
      return null
    }
    await this.#forget(name)
    return null
  }

  /** The worktree as the session the run leaves keeps it. */
  sessionWorktree(open: OpenWorktree): SessionWorktree {
    return toSessionWorktree(open.worktree, open.plan.prefix)
  }

  /** The whole diff of one of the caller's runs, while it is kept; undefined when there is none here. */
  async diff(caller: string, runId: string): Promise<{ size: number; stream: ReadStream } | undefined> {
    if (!RUN_ID.test(runId)) return undefined
    const file = this.#diffFile(caller, runId)
    const found = await stat(file).catch(() => undefined)
    if (found === undefined || !found.isFile()) return undefined
    return { size: found.size, stream: createReadStream(file) }
  }

  /**
   * Removes what nothing needs any more: worktrees of runs that ended while the service was down (their record still
   * says running), of sessions expired or evicted, their repositories' entries pruned; and diffs past retention. At
   * start, then every few minutes. `inDistros: false` leaves a distro's leftovers (and their records) for later.
   */
  sweep(sessions: SessionStore, inDistros = true): Promise<string[]> {
    const next = this.#sweeping.then(() => this.#sweepOnce(sessions, inDistros))
    this.#sweeping = next.catch(() => undefined)
    return next
  }

  async #sweepOnce(sessions: SessionStore, inDistros: boolean): Promise<string[]> {
    const records = this.#recordsDir()
    const doomed = new Set<string>()
    for (const file of await readdir(records).catch(() => [])) {
      const name = file.replace(/\.json$/, '')
      if (this.#inUse.has(name)) continue
      const record = await this.#readRecord(name)
      const alive = record?.session !== undefined &&
        (await sessions.session(record.session.tool, record.session.id).catch(() => ({}))) !== undefined
      if (!alive) doomed.add(name)
    }
    const entries = await readdir(this.#settings.worktreesDir).catch(() => [])
    const live = new Set(entries.filter((name) => !doomed.has(name)))
    const pruned = await pruneWorktrees(this.#settings.worktreesDir, live)
    for (const name of doomed) {
      const record = await this.#readRecord(name)
      if (record?.distro !== undefined) {
        // A distro that cannot be reached now keeps its record, for a later sweep.
        if (!inDistros || !(await this.#removeInDistro(record.distro))) continue
        pruned.push(name)
      }
      await this.#forget(name)
    }
    await this.#sweepDiffs()
    return pruned
  }

  /**
   * Sweeps now and every few minutes, until `stop`; resolves with what the first sweep removed on this host. A
   * distro's leftovers cost wsl.exe round trips (a second or more each, on Windows): they go just after, never in the
   * service's start. What each later sweep removes, or why it failed, is logged.
   */
  async start(sessions: SessionStore, log: SweepLog): Promise<string[]> {
    const every = this.#settings.sweepEveryMs ?? SWEEP_EVERY_MS
    const sweep = async (): Promise<void> => {
      try {
        const names = await this.sweep(sessions)
        if (names.length > 0) {
          log.warn({ worktrees: names }, `removed ${names.length} worktree(s) nothing needs any more`)
        }
      } catch (error) {
        log.warn({ err: error }, 'worktrees not swept')
      }
    }
    this.#sweeper = setInterval(() => { void sweep() }, every).unref()
    const removed = await this.sweep(sessions, false)
    void sweep()
    return removed
  }

  /** No sweep after this; resolves once the one under way, if any, is done (it may be removing a worktree). */
  async stop(): Promise<void> {
    clearInterval(this.#sweeper)
    await this.#sweeping
  }

  async #assertBranch(repository: Repository, params: RunParams, identity: GitUser): Promise<void> {
    const branch = params.commit?.branch
    if (branch !== undefined) await assertNewBranch(inRepository(repository, identity), branch)
  }

  async #removeInDistro({ name, user, path, repository }: NonNullable<WorktreeRecord['distro']>): Promise<boolean> {
    const identity: WslUser = { wslBin: this.#settings.wslBin, distro: name, user }
    return removeLeftover(path, repository, identity).then(() => true, () => false)
  }

  #nameOf(worktree: Worktree): string {
    return worktree.path.slice(worktree.path.lastIndexOf('/') + 1)
  }

  /** Beside the worktrees (which may be under DATA_DIR too), never among them. */
  #recordsDir(): string {
    return join(this.#settings.stateDir, 'worktree-records')
  }

  #recordFile(name: string): string {
    return join(this.#recordsDir(), `${name}.json`)
  }

  async #writeRecord(name: string, record: WorktreeRecord): Promise<void> {
    await mkdir(this.#recordsDir(), { recursive: true, mode: 0o700 })
    await writeFile(this.#recordFile(name), JSON.stringify(record), { mode: 0o600 })
  }

  async #readRecord(name: string): Promise<WorktreeRecord | undefined> {
    try {
      return JSON.parse(await readFile(this.#recordFile(name), 'utf8')) as WorktreeRecord
    } catch {
      return undefined
    }
  }

  async #forget(name: string): Promise<void> {
    this.#inUse.delete(name)
    await rm(this.#recordFile(name), { force: true })
  }

  /** Each caller's diffs in a directory of their own: a run id alone never reaches another caller's. */
  #callerDir(caller: string): string {
    return join(this.#settings.stateDir, 'diffs', createHash('sha256').update(caller).digest('hex').slice(0, 32))
  }

  #diffFile(caller: string, runId: string): string {
    return join(this.#callerDir(caller), `${runId}.diff`)
  }

  async #newDiffFile(caller: string, runId: string): Promise<string> {
    await mkdir(this.#callerDir(caller), { recursive: true, mode: 0o700 })
    return this.#diffFile(caller, runId)
  }

  async #sweepDiffs(): Promise<void> {
    const diffs = join(this.#settings.stateDir, 'diffs')
    const before = Date.now() - this.#settings.diffRetentionMs
    for (const caller of await readdir(diffs).catch(() => [])) {
      for (const file of await readdir(join(diffs, caller)).catch(() => [])) {
        const path = join(diffs, caller, file)
        const found = await stat(path).catch(() => undefined)
        if (found !== undefined && found.mtimeMs < before) await rm(path, { force: true })
      }
    }
  }
}

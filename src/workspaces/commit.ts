import { git, GitFailed, type GitCall, text } from './git.js'
import { stageAll } from './changeset.js'
import { inWorktree, type Worktree } from './worktree.js'

/** The branch to commit on exists already (409 BRANCH_EXISTS): a run never moves a branch it did not make. */
export class BranchExists extends Error {
  readonly code = 'BRANCH_EXISTS'
  constructor(branch: string) {
    super(`branch ${branch} exists already`)
    this.name = 'BranchExists'
  }
}

/** The branch named is no valid branch name (400), or one a revision would read as another ref. */
export class InvalidBranchName extends Error {
  readonly code = 'INVALID_BRANCH_NAME'
  constructor(branch: string, why = 'is not a valid branch name') {
    super(`${JSON.stringify(branch)} ${why}`)
    this.name = 'InvalidBranchName'
  }
}

/**
 * Names git reads before `refs/heads/<name>` when it resolves a revision (a pseudo-ref, `refs/<name>`,
 * `refs/tags/<name>`, …): a branch so named would be made, and the name would then mean something else.
 */
const SHADOWING = /^(?:@|[A-Z_]*HEAD|(?:refs|heads|tags|remotes)\/.*)$/s

export interface Author {
  name: string
  email: string
}

/** `Name <email>` (WORKSPACE_COMMIT_AUTHOR), as git would write it: a name, and an address without angle brackets. */
export function parseAuthor(value: string): Author {
  const match = /^([^<>\n]*[^<>\s])\s*<([^<>\s]+)>$/.exec(value.trim())
  if (match === null) throw new Error(`not an author: ${JSON.stringify(value)} (expected: Name <email>)`)
  return { name: match[1]!, email: match[2]! }
}

const withNewline = (message: string): string => message.endsWith('\n') ? message : `${message}\n`

/** The branch a run commits on when it names none. */
const defaultBranch = (runId: string): string => `agent-runner/${runId}`

/**
 * The ref a new branch `branch` would be, from a call in the repository: refused when the name is none git allows, or
 * when the branch exists (checked again, atomically, when it is written).
 */
export async function assertNewBranch(call: GitCall, branch: string): Promise<string> {
  const checked = await git(['check-ref-format', '--branch', branch], call).then(text, () => undefined)
  // `--branch` also expands `@{-1}`: only a name that is its own expansion is one
  if (checked !== branch || branch === 'HEAD' || branch.startsWith('-')) throw new InvalidBranchName(branch)
  if (SHADOWING.test(branch)) {
    throw new InvalidBranchName(branch, 'would be read as another ref (refs/…, heads/…, tags/…, remotes/…, @, *HEAD)')
  }
  const ref = `refs/heads/${branch}`
  const exists = await git(['show-ref', '--verify', '--quiet', ref], { ...call, okExitCodes: [0, 1] })
  if (exists.exitCode === 0) throw new BranchExists(branch)
  return ref
}

export interface CommitOptions {
  runId: string
  /** `agent-runner/<run id>` unless named. */
  branch?: string | undefined
  message?: string | undefined
  author: Author
}

export interface Commit {
  branch: string
  /** The new branch's commit: the one made, or the worktree's HEAD when nothing was left to commit. */
  head: string
}

/**
 * Commits what the worktree holds (its agent's commits, and on top what it left, tracked or not) on a new branch of
 * the caller's repository, by plumbing: no hook, editor, template or signing, the author and committer the service's,
 * never the agent's config. The branch is created only if it does not exist (atomically: another run cannot take it
 * between the check and the write).
 */
export async function commitChanges(worktree: Worktree, options: CommitOptions): Promise<Commit> {
  const call = inWorktree(worktree)
  const branch = options.branch ?? defaultBranch(options.runId)
  const ref = await assertNewBranch(call, branch)
  const staged = await stageAll(worktree)
  const tree = text(await git(['write-tree'], staged))
  const parent = text(await git(['rev-parse', '--verify', 'HEAD^{commit}'], call))
  const parentTree = text(await git(['rev-parse', '--verify', `${parent}^{tree}`], call))
  const { name, email } = options.author
  const head = tree === parentTree
    ? parent
    : text(await git(['commit-tree', '--no-gpg-sign', '-p', parent, '-F', '-', tree], {
      ...call,
      config: [['user.useConfigOnly', 'false']],
      env: {
        ...call.env,
        GIT_AUTHOR_NAME: name,
        GIT_AUTHOR_EMAIL: email,
        GIT_COMMITTER_NAME: name,
        GIT_COMMITTER_EMAIL: email
      },
      input: withNewline(options.message ?? `agent-runner: run ${options.runId}`)
    }))
  try {
    await git(['update-ref', '-m', `agent-runner: run ${options.runId}`, ref, head, ''], call)
  } catch (error) {
    if (error instanceof GitFailed && /exists|reference already/i.test(error.stderr)) throw new BranchExists(branch)
    throw error
  }
  return { branch, head }
}

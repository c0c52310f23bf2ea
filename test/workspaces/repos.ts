import { execFileSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Test } from 'tap'
import { git, type GitIdentity, text } from '#src/workspaces/git.js'
import { addWorktree, inWorktree, resolveBase, resolveRepository, type Worktree } from '#src/workspaces/worktree.js'
import { tempDir } from '../helpers/app.js'
import { asRoot } from '../helpers/users.js'

// Real repositories, made with Debian's git by the test (as root when it is): the caller's side. The service's side
// runs as IDENTITY, a uid with no account, as a token's agent user is.

export const IDENTITY: GitIdentity | undefined = asRoot ? { uid: 64_201, gid: 64_201 } : undefined

/** git as the caller: its own config only, a fixed author; its `.git` shared with IDENTITY is its own still. */
export function callerGit(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'safe.directory=*', ...args], {
    cwd,
    encoding: 'utf8',
    env: {
      PATH: process.env['PATH'],
      HOME: cwd,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_AUTHOR_NAME: 'Caller',
      GIT_AUTHOR_EMAIL: 'caller@example.com',
      GIT_COMMITTER_NAME: 'Caller',
      GIT_COMMITTER_EMAIL: 'caller@example.com'
    }
  })
}

export interface Scene {
  /** A directory every test user may cross, holding the rest. */
  dir: string
  repo: string
  root: string
  /** Where a hostile program would leave its mark: anyone may write there. */
  markers: string
}

/**
 * A repository with a first commit of `files`, owned by the caller (root) with its `.git` writable by IDENTITY (a
 * worktree's entry and a commit's objects go there), as a repository shared with an agent user is.
 */
export function scene(t: Test, files: Record<string, string> = { 'README.md': 'hello\n' }): Scene {
  const dir = tempDir(t)
  chmodSync(dir, 0o711)
  const repo = join(dir, 'repo')
  mkdirSync(repo, { mode: 0o755 })
  callerGit(repo, 'init', '-q', '-b', 'main')
  writeFiles(repo, files)
  callerGit(repo, 'add', '-A')
  callerGit(repo, 'commit', '-q', '-m', 'first')
  shareGitDir(repo)
  const markers = join(dir, 'markers')
  mkdirSync(markers)
  chmodSync(markers, 0o1777)
  return { dir, repo, root: join(dir, 'worktrees'), markers }
}

/** After the caller's own git wrote to `.git`: IDENTITY may write there again. */
function shareGitDir(repo: string): void {
  if (IDENTITY !== undefined) execFileSync('chown', ['-R', `${IDENTITY.uid}:${IDENTITY.gid}`, join(repo, '.git')])
}

export function writeFiles(dir: string, files: Record<string, string | Buffer>): void {
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true })
    writeFileSync(join(dir, name), content)
  }
}

/** What an agent leaves is its user's. */
export function asAgentLeftIt(worktree: Worktree): void {
  if (IDENTITY !== undefined) execFileSync('chown', ['-R', `${IDENTITY.uid}:${IDENTITY.gid}`, worktree.path])
}

/** The agent commits in its worktree, as its own author: its HEAD moves from base. */
export async function agentCommits(worktree: Worktree, ...paths: string[]): Promise<string> {
  const call = inWorktree(worktree)
  const author = { GIT_AUTHOR_NAME: 'agent', GIT_AUTHOR_EMAIL: 'a@x' }
  const asAgent = {
    ...call, env: { ...call.env, ...author, GIT_COMMITTER_NAME: 'agent', GIT_COMMITTER_EMAIL: 'a@x' }
  }
  await git(['add', ...paths], asAgent)
  await git(['commit', '-q', '-m', 'the agent\'s'], asAgent)
  return text(await git(['rev-parse', 'HEAD'], asAgent))
}

let runs = 0
export const runId = (): string => `run-${process.pid}-${++runs}`

/** A run's worktree of the scene's repository, at `base`, whatever the caller's git wrote meanwhile. */
export async function worktreeOf(s: Scene, base = 'HEAD', id = runId()): Promise<Worktree> {
  shareGitDir(s.repo)
  const { repository } = await resolveRepository(s.repo, IDENTITY)
  return addWorktree({
    repository,
    base: await resolveBase(repository, base, IDENTITY),
    root: s.root,
    runId: id,
    identity: IDENTITY
  })
}

/** The caller's `git status`: empty when nothing of its tree and index was touched. */
export const callerStatus = (s: Scene): string => callerGit(s.repo, 'status', '--porcelain', '--untracked-files=all')

/** The marks hostile programs left, if any ran. */
export const marks = (s: Scene, ...names: string[]): string[] =>
  names.filter((name) => existsSync(join(s.markers, name)))

/** The caller's repository's worktrees, its own first: one when every run's entry is gone. */
export const worktreeList = (s: Scene): string[] =>
  callerGit(s.repo, 'worktree', 'list', '--porcelain').split('\n').filter((line) => line.startsWith('worktree '))

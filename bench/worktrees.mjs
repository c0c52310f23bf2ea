// Issue 39's rows: what a worktree run's own git work costs on a large repository, against the bare commands that do
// the same (git worktree add, then git diff), and against copying the tree (cp -r). Each measured back to back, A then
// B, on one repository made once; the service's modules (dist/workspaces/) run in this process, as the launcher runs
// them, without an agent in between.
import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const execFileP = promisify(execFile)
const ROOT = fileURLToPath(new URL('..', import.meta.url))
const FILES = Number(process.env.BENCH_WORKTREE_FILES ?? 100_000)
const PER_DIRECTORY = 1000

const { addWorktree, removeWorktree, resolveBase, resolveRepository } = await import(`${ROOT}dist/workspaces/worktree.js`)
const { changeset } = await import(`${ROOT}dist/workspaces/changeset.js`)

const git = (cwd, ...args) => execFileP('git', ['-c', 'safe.directory=*', ...args], {
  cwd,
  maxBuffer: 256 * 1024 * 1024,
  env: {
    PATH: process.env.PATH,
    HOME: cwd,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_AUTHOR_NAME: 'bench',
    GIT_AUTHOR_EMAIL: 'bench@example.com',
    GIT_COMMITTER_NAME: 'bench',
    GIT_COMMITTER_EMAIL: 'bench@example.com'
  }
})

const timed = async (work) => {
  const start = performance.now()
  await work()
  return performance.now() - start
}

/**
 * In memory where the machine has it: this VM's disk spends seconds of kernel time per 20,000 files created, which
 * buries what the rows compare (git's work and the service's) under noise from the disk.
 */
const WHERE = process.env.BENCH_WORKTREE_DIR ?? (existsSync('/dev/shm') ? '/dev/shm' : tmpdir())

/** A repository of FILES small files in directories of PER_DIRECTORY, one commit. */
export async function benchRepository() {
  const dir = mkdtempSync(join(WHERE, 'agent-runner-bench-repo-'))
  const repo = join(dir, 'repo')
  for (let i = 0; i < FILES; i++) {
    const sub = join(repo, `d${Math.floor(i / PER_DIRECTORY)}`)
    if (i % PER_DIRECTORY === 0) mkdirSync(sub, { recursive: true })
    writeFileSync(join(sub, `f${i}.txt`), `file ${i}\n`)
  }
  await git(repo, 'init', '-q', '-b', 'main')
  await git(repo, 'add', '-A')
  await git(repo, 'commit', '-q', '-m', 'bench')
  return { dir, repo, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

/** One file changed, one added: what an agent's small edit leaves. */
function edit(tree) {
  writeFileSync(join(tree, 'd0', 'f0.txt'), 'changed\n')
  writeFileSync(join(tree, 'added.txt'), 'new\n')
}

let made = 0

/** Ours: a hardened worktree at HEAD, the edit, the changeset (its whole diff to a file), the worktree removed. */
async function ours(dir, repo) {
  const runId = `ours-${process.pid}-${++made}`
  const { repository } = await resolveRepository(repo)
  const base = await resolveBase(repository, 'HEAD')
  const worktree = await addWorktree({ repository, base, root: join(dir, 'worktrees'), runId })
  edit(worktree.path)
  const changes = await changeset(worktree, { diffLimitBytes: 262_144, diffFile: join(dir, `${runId}.diff`) })
  if (changes.files.length !== 2) throw new Error(`bench: ${changes.files.length} files changed, not 2`)
  await removeWorktree(worktree)
}

/** Bare git: `worktree add`, the edit, `add -A` and `diff --cached` (what a changeset of new files needs), removed. */
async function bare(dir, repo) {
  const path = join(dir, `bare-${++made}`)
  await git(repo, 'worktree', 'add', '-q', '--detach', path, 'HEAD')
  edit(path)
  await git(path, 'add', '-A')
  await git(path, 'diff', '--cached', '--binary', 'HEAD')
  await git(repo, 'worktree', 'remove', '--force', path)
}

/** A copy of the tree (no history): what isolating a run costs without git. */
async function copy(dir, repo) {
  const path = join(dir, `copy-${++made}`)
  await execFileP('cp', ['-r', repo, path])
  rmSync(path, { recursive: true, force: true })
}

export async function worktreesOnce(repository) {
  const { dir, repo } = repository
  const bareMs = await timed(() => bare(dir, repo))
  const oursMs = await timed(() => ours(dir, repo))
  const copyMs = await timed(() => copy(dir, repo))
  return { worktreeBareMs: bareMs, worktreeOursMs: oursMs, worktreeCopyMs: copyMs, worktreeRatio: oursMs / bareMs, worktreeCopyRatio: oursMs / copyMs }
}

export const WORKTREE_FILES = FILES

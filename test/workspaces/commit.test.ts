import t from 'tap'
import { changeset } from '#src/workspaces/changeset.js'
import { BranchExists, commitChanges, InvalidBranchName } from '#src/workspaces/commit.js'
import { git, text } from '#src/workspaces/git.js'
import { inWorktree } from '#src/workspaces/worktree.js'
import { agentCommits, asAgentLeftIt, callerGit, callerStatus, scene, worktreeOf, writeFiles } from './repos.js'

// `commit` (src/workspaces/commit.ts): the run's changes committed on a new branch of the caller's repository, by
// the service's author, whatever the repository's config says.

const AUTHOR = { name: 'agent-runner', email: 'agent-runner@example.com' }

t.test('committed on agent-runner/<run id> by the service\'s author; the caller\'s branch and tree untouched',
  async (t) => {
    const s = scene(t, { 'a.txt': 'a\n' })
    callerGit(s.repo, 'config', 'user.name', 'Repo Config')
    callerGit(s.repo, 'config', 'user.email', 'repo@example.com')
    callerGit(s.repo, 'config', 'author.name', 'Repo Author')
    callerGit(s.repo, 'config', 'user.useConfigOnly', 'true')
    const main = callerGit(s.repo, 'rev-parse', 'main').trim()
    const worktree = await worktreeOf(s)
    writeFiles(worktree.path, { 'a.txt': 'a\nb\n', 'untracked.txt': 'new\n' })
    asAgentLeftIt(worktree)
    const before = await changeset(worktree, { diffLimitBytes: 65536 })
    const commit = await commitChanges(worktree, { runId: 'run-1', author: AUTHOR })
    t.equal(commit.branch, 'agent-runner/run-1')
    t.equal(callerGit(s.repo, 'rev-parse', 'agent-runner/run-1').trim(), commit.head)
    t.equal(callerGit(s.repo, 'log', '-1', '--format=%an <%ae>|%cn <%ce>|%s|%P', commit.head).trim(),
      `agent-runner <agent-runner@example.com>|agent-runner <agent-runner@example.com>|agent-runner: run run-1|${main}`)
    t.same(callerGit(s.repo, 'diff', '--name-status', main, commit.head).trim().split('\n'),
      ['M\ta.txt', 'A\tuntracked.txt'])
    t.equal(callerGit(s.repo, 'rev-parse', 'main').trim(), main)
    t.equal(callerGit(s.repo, 'symbolic-ref', 'HEAD').trim(), 'refs/heads/main')
    t.equal(callerStatus(s), '')
    // the commit holds what the changeset said
    t.same((await changeset(worktree, { diffLimitBytes: 65536 })).files, before.files)
    t.equal(text(await git(['rev-parse', 'HEAD'], inWorktree(worktree))), worktree.base, 'the worktree stays put')
  })

t.test('a branch named, with a message; one that exists is BRANCH_EXISTS and nothing is moved', async (t) => {
  const s = scene(t)
  const worktree = await worktreeOf(s)
  writeFiles(worktree.path, { 'x.txt': 'x\n' })
  asAgentLeftIt(worktree)
  const commit = await commitChanges(worktree, {
    runId: 'r', branch: 'feature/x', message: '-m starts like an option\n\nbody', author: AUTHOR
  })
  t.equal(commit.branch, 'feature/x')
  t.equal(callerGit(s.repo, 'log', '-1', '--format=%B', 'feature/x'), '-m starts like an option\n\nbody\n\n')
  const main = callerGit(s.repo, 'rev-parse', 'main').trim()
  for (const branch of ['feature/x', 'main']) {
    await t.rejects(commitChanges(worktree, { runId: 'r', branch, author: AUTHOR }),
      { name: 'BranchExists', code: 'BRANCH_EXISTS' }, branch)
  }
  t.equal(callerGit(s.repo, 'rev-parse', 'main').trim(), main)
  t.equal(callerGit(s.repo, 'rev-parse', 'feature/x').trim(), commit.head)
  t.ok(new BranchExists('b') instanceof Error)
})

t.test('names that are no branch are refused, @{-1} and options included', async (t) => {
  const s = scene(t)
  const worktree = await worktreeOf(s)
  const names = ['', 'a..b', 'a b', 'x.lock', '-x', '--force', '@{-1}', 'HEAD', 'a~1', 'refs/heads/../x', '/x']
  for (const branch of names) {
    await t.rejects(commitChanges(worktree, { runId: 'r', branch, author: AUTHOR }),
      { name: 'InvalidBranchName', code: 'INVALID_BRANCH_NAME' }, JSON.stringify(branch))
  }
  t.ok(new InvalidBranchName('x') instanceof Error)
})

t.test('names that a revision would read as another ref (refs/…, heads/…, tags/…, remotes/…, @, pseudo-refs) are ' +
  'refused: the branch made would not be what its name resolves to', async (t) => {
  const s = scene(t)
  const worktree = await worktreeOf(s)
  for (const branch of ['refs/heads/main', 'refs/x', 'heads/main', 'tags/v1', 'remotes/origin/main', '@', 'FETCH_HEAD',
    'ORIG_HEAD', 'MERGE_HEAD']) {
    await t.rejects(commitChanges(worktree, { runId: 'r', branch, author: AUTHOR }),
      { name: 'InvalidBranchName', code: 'INVALID_BRANCH_NAME', message: /another ref/ }, JSON.stringify(branch))
  }
  t.equal(callerGit(s.repo, 'for-each-ref', '--format=%(refname)').trim(), 'refs/heads/main', 'no ref made')
  t.match(await commitChanges(worktree, { runId: 'r', branch: 'fix/refs-heads', author: AUTHOR }),
    { branch: 'fix/refs-heads' }, 'such words elsewhere in a name are fine')
})

t.test('nothing left to commit: the branch is the worktree\'s HEAD (the agent\'s own commit, or base)', async (t) => {
  const s = scene(t)
  const worktree = await worktreeOf(s)
  const untouched = await commitChanges(worktree, { runId: 'same', author: AUTHOR })
  t.equal(untouched.head, worktree.base)
  writeFiles(worktree.path, { 'y.txt': 'y\n' })
  asAgentLeftIt(worktree)
  const agents = await agentCommits(worktree, '-A')
  t.equal((await commitChanges(worktree, { runId: 'its-own', author: AUTHOR })).head, agents)
  t.equal(callerGit(s.repo, 'rev-parse', 'agent-runner/its-own').trim(), agents)
  t.equal(callerGit(s.repo, 'show', '-s', '--format=%an', 'agent-runner/its-own').trim(), 'agent')
})

t.test('a branch in the way of the name (agent-runner for agent-runner/…) is BRANCH_EXISTS too, from git itself',
  async (t) => {
    const s = scene(t)
    const worktree = await worktreeOf(s)
    callerGit(s.repo, 'branch', 'agent-runner')
    writeFiles(worktree.path, { 'z.txt': 'z\n' })
    asAgentLeftIt(worktree)
    await t.rejects(commitChanges(worktree, { runId: 'r2', author: AUTHOR }), { name: 'BranchExists' })
    t.equal(callerGit(s.repo, 'branch', '--list', 'agent-runner*').trim(), 'agent-runner')
  })

import { chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { changeset } from '#src/workspaces/changeset.js'
import { commitChanges } from '#src/workspaces/commit.js'
import { asAgentLeftIt, callerGit, marks, type Scene, scene, worktreeOf, writeFiles } from './repos.js'

// A repository is hostile input (issue 39): what its config, hooks and attributes name never runs when the service
// makes a worktree, reads its changes or commits them. Each trap is first sprung by the caller's plain git (so a test
// that sees no mark is not one whose trap was broken), then the service's calls must leave no mark.

const AUTHOR = { name: 'agent-runner', email: 'agent-runner@example.com' }

/** A program that leaves a mark named `name`, then passes its stdin through (a filter or textconv must). */
function trap(s: Scene, name: string): string {
  const bin = join(s.dir, 'bin')
  mkdirSync(bin, { recursive: true, mode: 0o755 })
  const file = join(bin, name)
  writeFileSync(file, `#!/bin/sh\ntouch ${join(s.markers, name)}\ncat\n`)
  chmodSync(file, 0o755)
  return file
}

/** Whether a plain git command springs the trap: it must, or the test proves nothing. */
function sprung(t: Test, s: Scene, name: string, spring: () => void): void {
  try {
    spring()
  } catch {
    // the trap may make the caller's git fail too: what counts is that it ran
  }
  t.same(marks(s, name), [name], `the caller's own git springs ${name}`)
  clearMarks(s)
}

/** Whatever the caller's own git set off, before the service's turn. */
function clearMarks(s: Scene): void {
  for (const mark of readdirSync(s.markers)) rmSync(join(s.markers, mark))
}

t.test('hooks (post-checkout, reference-transaction, pre-commit…), in .git/hooks or a planted core.hooksPath',
  async (t) => {
    const s = scene(t)
    const hooks = join(s.repo, '.git', 'hooks')
    const planted = join(s.dir, 'planted-hooks')
    mkdirSync(planted)
    for (const hook of ['post-checkout', 'reference-transaction', 'pre-commit', 'commit-msg', 'post-commit',
      'post-index-change', 'pre-auto-gc']) {
      writeFileSync(join(hooks, hook), `#!/bin/sh\ntouch ${join(s.markers, hook)}\n`, { mode: 0o755 })
      writeFileSync(join(planted, hook), `#!/bin/sh\ntouch ${join(s.markers, `planted-${hook}`)}\n`, { mode: 0o755 })
    }
    sprung(t, s, 'post-checkout', () => callerGit(s.repo, 'worktree', 'add', '-q', '--detach', join(s.dir, 'control')))
    callerGit(s.repo, 'worktree', 'remove', '--force', join(s.dir, 'control'))
    callerGit(s.repo, 'config', 'core.hooksPath', planted)
    clearMarks(s)
    const worktree = await worktreeOf(s)
    writeFiles(worktree.path, { 'a.txt': 'a\n' })
    asAgentLeftIt(worktree)
    await changeset(worktree, { diffLimitBytes: 4096 })
    await commitChanges(worktree, { runId: 'hooks', author: AUTHOR })
    t.same(marks(s, ...['post-checkout', 'reference-transaction', 'pre-commit', 'commit-msg', 'post-commit',
      'post-index-change', 'pre-auto-gc'].flatMap((hook) => [hook, `planted-${hook}`])), [])
  })

t.test('core.fsmonitor: the program a refresh would ask never runs', async (t) => {
  const s = scene(t, { 'a.txt': 'a\n' })
  const monitor = trap(s, 'fsmonitor')
  callerGit(s.repo, 'config', 'core.fsmonitor', monitor)
  sprung(t, s, 'fsmonitor', () => callerGit(s.repo, 'status'))
  const worktree = await worktreeOf(s)
  writeFiles(worktree.path, { 'a.txt': 'b\n' })
  asAgentLeftIt(worktree)
  const changes = await changeset(worktree, { diffLimitBytes: 4096 })
  t.same(changes.files.map((file) => file.path), ['a.txt'])
  await commitChanges(worktree, { runId: 'fsmonitor', author: AUTHOR })
  t.same(marks(s, 'fsmonitor'), [])
})

t.test('clean, smudge and process filters named by .gitattributes, in the config or a file it includes',
  async (t) => {
    const s = scene(t, { '.gitattributes': '*.txt filter=evil\n*.md filter=included\n', 'a.txt': 'a\n', 'b.md': 'b\n' })
    const [clean, smudge, processFilter] = [trap(s, 'clean'), trap(s, 'smudge'), trap(s, 'process')]
    callerGit(s.repo, 'config', 'filter.evil.clean', clean)
    callerGit(s.repo, 'config', 'filter.evil.smudge', smudge)
    callerGit(s.repo, 'config', 'filter.evil.required', 'true')
    const included = join(s.dir, 'included.config')
    writeFileSync(included, `[filter "included"]\n\tprocess = ${processFilter}\n\trequired = true\n`)
    chmodSync(included, 0o644)
    callerGit(s.repo, 'config', 'include.path', included)
    sprung(t, s, 'smudge', () => callerGit(s.repo, 'worktree', 'add', '-q', '--detach', join(s.dir, 'control')))
    writeFiles(s.repo, { 'a.txt': 'changed\n' })
    sprung(t, s, 'clean', () => callerGit(s.repo, 'add', 'a.txt'))
    writeFiles(s.repo, { 'b.md': 'changed\n' })
    sprung(t, s, 'process', () => callerGit(s.repo, 'add', 'b.md'))
    const unfiltered = ['filter.evil.clean=', 'filter.evil.smudge=', 'filter.evil.required=false',
      'filter.included.process=', 'filter.included.required=false'].flatMap((option) => ['-c', option])
    callerGit(s.repo, ...unfiltered, 'reset', '-q', '--hard')
    // the smudge filter failed the caller's worktree add (the filter is required): nothing of it is left but a mark
    rmSync(join(s.dir, 'control'), { recursive: true, force: true })
    callerGit(s.repo, 'worktree', 'prune')
    clearMarks(s)
    const worktree = await worktreeOf(s)
    writeFiles(worktree.path, { 'a.txt': 'a2\n', 'b.md': 'b2\n', 'c.txt': 'c\n' })
    asAgentLeftIt(worktree)
    const changes = await changeset(worktree, { diffLimitBytes: 4096 })
    t.same(changes.files.map((file) => file.path), ['a.txt', 'b.md', 'c.txt'])
    await commitChanges(worktree, { runId: 'filters', author: AUTHOR })
    t.same(marks(s, 'clean', 'smudge', 'process'), [])
  })

t.test('a filter the config defines only for worktrees ([includeIf "gitdir:**/worktrees/**"]) never runs either: the ' +
  'overrides are read as the worktree’s own git directory sees its config', async (t) => {
  const s = scene(t, { '.gitattributes': '* filter=x\n', 'a.txt': 'a\n' })
  const smudge = trap(s, 'smudge')
  const clean = trap(s, 'clean')
  const evil = join(s.dir, 'evil.config')
  writeFileSync(evil, `[filter "x"]\n\tsmudge = ${smudge}\n\tclean = ${clean}\n\trequired = true\n`)
  chmodSync(evil, 0o644)
  callerGit(s.repo, 'config', 'includeIf.gitdir:**/worktrees/**.path', evil)
  sprung(t, s, 'smudge', () => callerGit(s.repo, 'worktree', 'add', '-q', '--detach', join(s.dir, 'control')))
  rmSync(join(s.dir, 'control'), { recursive: true, force: true })
  callerGit(s.repo, 'worktree', 'prune')
  const worktree = await worktreeOf(s)
  t.same(marks(s, 'smudge'), [], 'made and checked out with no filter run')
  t.equal(readFileSync(join(worktree.path, 'a.txt'), 'utf8'), 'a\n', 'its files as committed')
  writeFiles(worktree.path, { 'a.txt': 'a2\n' })
  asAgentLeftIt(worktree)
  const changes = await changeset(worktree, { diffLimitBytes: 4096 })
  t.same(changes.files.map((file) => file.path), ['a.txt'])
  await commitChanges(worktree, { runId: 'worktree-only-filter', author: AUTHOR })
  t.same(marks(s, 'clean', 'smudge'), [])
})

t.test('diff drivers (textconv, an external command) and diff.external never run for a changeset', async (t) => {
  const s = scene(t, { '.gitattributes': '*.txt diff=evil\n', 'a.txt': 'a\n' })
  callerGit(s.repo, 'config', 'diff.evil.textconv', trap(s, 'textconv'))
  callerGit(s.repo, 'config', 'diff.evil.command', trap(s, 'diff-command'))
  callerGit(s.repo, 'config', 'diff.external', trap(s, 'diff-external'))
  writeFiles(s.repo, { 'a.txt': 'changed\n' })
  sprung(t, s, 'diff-command', () => callerGit(s.repo, 'diff'))
  sprung(t, s, 'textconv', () => callerGit(s.repo, 'diff', '--no-ext-diff'))
  callerGit(s.repo, 'config', '--unset', 'diff.evil.command')
  sprung(t, s, 'diff-external', () => callerGit(s.repo, 'diff'))
  callerGit(s.repo, 'config', 'diff.evil.command', trap(s, 'diff-command'))
  callerGit(s.repo, 'checkout', '-q', '--', 'a.txt')
  clearMarks(s)
  const worktree = await worktreeOf(s)
  writeFiles(worktree.path, { 'a.txt': 'b\n' })
  asAgentLeftIt(worktree)
  const changes = await changeset(worktree, { diffLimitBytes: 4096 })
  t.match(changes.diff, /-a\n\+b\n/)
  t.same(marks(s, 'textconv', 'diff-command', 'diff-external'), [])
})

t.test('a partial clone\'s lazy fetch through ext:: (its protocol allowed by the repository) never runs',
  async (t) => {
    const s = scene(t, { 'a.txt': 'the blob that is missing\n' })
    const blob = callerGit(s.repo, 'rev-parse', 'HEAD:a.txt').trim()
    unlinkSync(join(s.repo, '.git', 'objects', blob.slice(0, 2), blob.slice(2)))
    callerGit(s.repo, 'config', 'core.repositoryformatversion', '1')
    callerGit(s.repo, 'config', 'extensions.partialClone', 'evil')
    callerGit(s.repo, 'config', 'remote.evil.url', `ext::sh -c touch% ${join(s.markers, 'ext')}`)
    callerGit(s.repo, 'config', 'remote.evil.promisor', 'true')
    callerGit(s.repo, 'config', 'protocol.ext.allow', 'always')
    sprung(t, s, 'ext', () => callerGit(s.repo, '-c', 'protocol.allow=never', 'cat-file', '-p', blob))
    await t.rejects(worktreeOf(s), { name: 'GitFailed' }, 'the object is missing, and stays so')
    t.same(marks(s, 'ext'), [])
  })

t.test('commit signing the repository asks for (commit.gpgSign, gpg.program) never runs', async (t) => {
  const s = scene(t)
  callerGit(s.repo, 'config', 'commit.gpgSign', 'true')
  callerGit(s.repo, 'config', 'gpg.program', trap(s, 'gpg'))
  sprung(t, s, 'gpg', () => callerGit(s.repo, 'commit', '-q', '--allow-empty', '-m', 'signed?'))
  const worktree = await worktreeOf(s)
  writeFiles(worktree.path, { 'a.txt': 'a\n' })
  asAgentLeftIt(worktree)
  const commit = await commitChanges(worktree, { runId: 'gpg', author: AUTHOR })
  t.equal(callerGit(s.repo, 'cat-file', '-p', commit.head).includes('gpgsig'), false)
  t.same(marks(s, 'gpg'), [])
})

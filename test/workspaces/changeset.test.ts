import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { changeset } from '#src/workspaces/changeset.js'
import { git, text } from '#src/workspaces/git.js'
import { inWorktree } from '#src/workspaces/worktree.js'
import { tempDir } from '../helpers/app.js'
import { agentCommits, asAgentLeftIt, callerGit, callerStatus, scene, worktreeOf, writeFiles } from './repos.js'

// What a run changed (src/workspaces/changeset.ts): every file against base, tracked or not, ignored ones left out;
// the unified diff bounded in memory, whole in its file.

const LIMIT = 64 * 1024

t.test('edits, adds, deletes, renames, untracked and ignored files: the changeset exact, the caller clean',
  async (t) => {
    const s = scene(t, {
      'edit.txt': 'one\ntwo\nthree\n',
      'delete.txt': 'gone\n',
      'rename-me.txt': 'a line that stays the same\nand another one\nand a third\n',
      '.gitignore': 'build/\n*.log\n'
    })
    const worktree = await worktreeOf(s)
    writeFiles(worktree.path, {
      'edit.txt': 'one\n2\nthree\nfour\n',
      'new/added.txt': 'added\n',
      'build/out.js': 'ignored\n',
      'debug.log': 'ignored\n'
    })
    unlinkSync(join(worktree.path, 'delete.txt'))
    renameSync(join(worktree.path, 'rename-me.txt'), join(worktree.path, 'renamed.txt'))
    asAgentLeftIt(worktree)
    const diffFile = join(tempDir(t), 'run.diff')
    const changes = await changeset(worktree, { diffLimitBytes: LIMIT, diffFile })
    t.equal(changes.base, worktree.base)
    t.equal(changes.head, null)
    t.same(changes.files, [
      { path: 'delete.txt', status: 'deleted', additions: 0, deletions: 1, binary: false },
      { path: 'edit.txt', status: 'modified', additions: 2, deletions: 1, binary: false },
      { path: 'new/added.txt', status: 'added', additions: 1, deletions: 0, binary: false },
      { path: 'renamed.txt', status: 'renamed', old_path: 'rename-me.txt', additions: 0, deletions: 0, binary: false }
    ])
    t.notOk(changes.diff_truncated)
    t.equal(changes.diff, readFileSync(diffFile, 'utf8'))
    t.equal(changes.diff_bytes, Buffer.byteLength(changes.diff))
    t.match(changes.diff, /^diff --git a\/delete.txt b\/delete.txt\n/)
    t.match(changes.diff, /rename from rename-me.txt\nrename to renamed.txt/)
    t.equal(statSync(diffFile).mode & 0o777, 0o600)
    // the patch applies to base: it is the whole change
    const check = await worktreeOf(s)
    execFileSync('git', ['-c', 'safe.directory=*', 'apply', '--index', diffFile], { cwd: check.path })
    t.equal(readFileSync(join(check.path, 'edit.txt'), 'utf8'), 'one\n2\nthree\nfour\n')
    t.equal(callerStatus(s), '', 'the caller\'s tree and index untouched')
    t.equal(callerGit(s.repo, 'diff', '--cached', '--name-only'), '')
  })

t.test('commits the agent made are counted from base, with what it left uncommitted', async (t) => {
  const s = scene(t, { 'a.txt': 'a\n' })
  const worktree = await worktreeOf(s)
  writeFiles(worktree.path, { 'a.txt': 'a\nb\n', 'c.txt': 'c\n' })
  asAgentLeftIt(worktree)
  await agentCommits(worktree, 'a.txt')
  writeFiles(worktree.path, { 'd.txt': 'd\n' })
  asAgentLeftIt(worktree)
  const changes = await changeset(worktree, { diffLimitBytes: LIMIT })
  t.not(changes.head, null)
  t.not(changes.head, worktree.base)
  t.same(changes.files.map((file) => [file.path, file.status]), [['a.txt', 'modified'], ['c.txt', 'added'],
    ['d.txt', 'added']])
  t.equal(callerStatus(s), '')
})

t.test('a binary file, a file with a newline in its name, a mode change', async (t) => {
  const s = scene(t, { 'script.sh': 'echo hi\n' })
  const worktree = await worktreeOf(s)
  writeFiles(worktree.path, { 'image.bin': Buffer.from([0, 1, 2, 0, 255, 0]), 'two\nlines.txt': 'x\n' })
  execFileSync('chmod', ['+x', join(worktree.path, 'script.sh')])
  asAgentLeftIt(worktree)
  const changes = await changeset(worktree, { diffLimitBytes: LIMIT })
  t.same(changes.files, [
    { path: 'image.bin', status: 'added', additions: 0, deletions: 0, binary: true },
    { path: 'script.sh', status: 'modified', additions: 0, deletions: 0, binary: false },
    { path: 'two\nlines.txt', status: 'added', additions: 1, deletions: 0, binary: false }
  ])
  t.match(changes.diff, /GIT binary patch/)
  t.match(changes.diff, /old mode 100644\nnew mode 100755/)
})

t.test('a tracked symlink pointing outside the tree: its target is never read, only the link', async (t) => {
  const outside = join(tempDir(t), 'secret.txt')
  writeFileSync(outside, 'SECRET CONTENT\n')
  const s = scene(t)
  symlinkSync(outside, join(s.repo, 'link'))
  symlinkSync('/etc', join(s.repo, 'etc-link'))
  callerGit(s.repo, 'add', '-A')
  callerGit(s.repo, 'commit', '-q', '-m', 'links')
  const worktree = await worktreeOf(s)
  // the agent points the link elsewhere and writes through the directory link's name: nothing git follows
  unlinkSync(join(worktree.path, 'link'))
  symlinkSync('/etc/hostname', join(worktree.path, 'link'))
  writeFiles(worktree.path, { 'inside.txt': 'x\n' })
  asAgentLeftIt(worktree)
  const changes = await changeset(worktree, { diffLimitBytes: LIMIT })
  t.same(changes.files.map((file) => [file.path, file.status, file.additions, file.deletions]), [
    ['inside.txt', 'added', 1, 0], ['link', 'modified', 1, 1]
  ])
  t.match(changes.diff, `-${outside}\n\\ No newline at end of file\n+/etc/hostname`)
  t.notMatch(changes.diff, /SECRET CONTENT/)
})

t.test('the diff file is a new file: a symlink planted at its path is never written through', async (t) => {
  const s = scene(t)
  const worktree = await worktreeOf(s)
  writeFiles(worktree.path, { 'a.txt': 'a\n' })
  asAgentLeftIt(worktree)
  const dir = tempDir(t)
  const target = join(dir, 'target')
  writeFileSync(target, 'untouched')
  symlinkSync(target, join(dir, 'run.diff'))
  await t.rejects(changeset(worktree, { diffLimitBytes: LIMIT, diffFile: join(dir, 'run.diff') }), { code: 'EEXIST' })
  t.equal(readFileSync(target, 'utf8'), 'untouched')
})

t.test('the diff limit: its head in memory, cut at a line, the whole patch in its file', async (t) => {
  const s = scene(t)
  const worktree = await worktreeOf(s)
  writeFiles(worktree.path, { 'big.txt': 'a line of the big file\n'.repeat(2000) })
  asAgentLeftIt(worktree)
  const diffFile = join(tempDir(t), 'run.diff')
  const changes = await changeset(worktree, { diffLimitBytes: 1000, diffFile })
  t.ok(changes.diff_truncated)
  t.ok(Buffer.byteLength(changes.diff) <= 1000)
  t.match(changes.diff, /\n$/)
  const whole = readFileSync(diffFile, 'utf8')
  t.equal(changes.diff_bytes, Buffer.byteLength(whole))
  t.ok(whole.startsWith(changes.diff))
  t.equal(changes.files[0]?.additions, 2000)
})

t.test('an index the agent left mid-merge does not stop the changeset', async (t) => {
  const s = scene(t, { 'a.txt': 'a\n' })
  const worktree = await worktreeOf(s)
  const blob = callerGit(s.repo, 'rev-parse', 'HEAD:a.txt').trim()
  await git(['update-index', '--index-info'], {
    ...inWorktree(worktree), input: `0 ${'0'.repeat(40)}\ta.txt\n100644 ${blob} 1\ta.txt\n100644 ${blob} 2\ta.txt\n`
  })
  writeFiles(worktree.path, { 'a.txt': 'merged\n' })
  asAgentLeftIt(worktree)
  const changes = await changeset(worktree, { diffLimitBytes: LIMIT })
  t.same(changes.files.map((file) => file.path), ['a.txt'])
})

t.test('10,000 files: the file list whole, the diff bounded', async (t) => {
  const s = scene(t)
  const worktree = await worktreeOf(s)
  const files: Record<string, string> = {}
  for (let i = 0; i < 10_000; i++) files[`many/${String(i).padStart(5, '0')}.txt`] = `file ${i}\n`.repeat(20)
  writeFiles(worktree.path, files)
  asAgentLeftIt(worktree)
  const diffFile = join(tempDir(t), 'run.diff')
  const changes = await changeset(worktree, { diffLimitBytes: LIMIT, diffFile })
  t.equal(changes.files.length, 10_000)
  t.ok(changes.files.every((file) => file.status === 'added' && file.additions === 20))
  t.ok(changes.diff_truncated)
  t.ok(Buffer.byteLength(changes.diff) <= LIMIT)
  t.equal(changes.diff_bytes, statSync(diffFile).size)
  t.ok(changes.diff_bytes > 20 * LIMIT)
  rmSync(diffFile)
})

t.test('the agent\'s own index is left as it was: what it staged, what it did not', async (t) => {
  const s = scene(t, { 'a.txt': 'a\n' })
  const worktree = await worktreeOf(s)
  writeFiles(worktree.path, { 'a.txt': 'staged\n', 'untracked.txt': 'u\n' })
  asAgentLeftIt(worktree)
  await git(['add', 'a.txt'], inWorktree(worktree))
  writeFiles(worktree.path, { 'a.txt': 'staged, then changed again\n' })
  asAgentLeftIt(worktree)
  const status = async (): Promise<string> =>
    text(await git(['status', '--porcelain', '--untracked-files=all'], inWorktree(worktree)))
  t.equal(await status(), 'MM a.txt\n?? untracked.txt')
  const changes = await changeset(worktree, { diffLimitBytes: LIMIT })
  t.same(changes.files.map((file) => file.path), ['a.txt', 'untracked.txt'])
  t.match(changes.diff, /\+staged, then changed again/)
  t.equal(await status(), 'MM a.txt\n?? untracked.txt')
})

t.test('a caller with a sparse checkout: the run\'s worktree is whole, and nothing counts as deleted', async (t) => {
  const s = scene(t, { 'kept/a.txt': 'a\n', 'left-out/b.txt': 'b\n' })
  callerGit(s.repo, 'sparse-checkout', 'set', '--no-cone', '/kept/')
  t.notOk(existsSync(join(s.repo, 'left-out')), 'the caller\'s own tree is sparse')
  const worktree = await worktreeOf(s)
  t.equal(readFileSync(join(worktree.path, 'left-out/b.txt'), 'utf8'), 'b\n')
  t.same((await changeset(worktree, { diffLimitBytes: LIMIT })).files, [])
})

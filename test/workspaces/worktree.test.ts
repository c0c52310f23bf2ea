import { execFileSync } from 'node:child_process'
import { existsSync, lstatSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { git, GitFailed, GitNotInstalled, text } from '#src/workspaces/git.js'
import {
  addWorktree, BaseNotFound, NotAGitRepository, pruneWorktrees, removeWorktree, resolveBase, resolveRepository
} from '#src/workspaces/worktree.js'
import { tempDir } from '../helpers/app.js'
import { asRoot } from '../helpers/users.js'
import { callerGit, callerStatus, IDENTITY, marks, runId, scene, writeFiles, worktreeOf } from './repos.js'

// A run's worktree (src/workspaces/worktree.ts): the repository of its cwd, its base, a detached worktree of its own
// in a directory of its own, removed at its end or at the next start.

const gitDirOf = (repo: string): string => join(repo, '.git')

t.test('the repository of a cwd, from any directory inside it, as the agent user', async (t) => {
  const s = scene(t, { 'src/a.ts': 'a\n' })
  const place = await resolveRepository(join(s.repo, 'src'), IDENTITY)
  t.same(place, { repository: { topLevel: s.repo, commonDir: join(s.repo, '.git') }, prefix: 'src/' })
  t.equal((await resolveRepository(s.repo, IDENTITY)).prefix, '', 'at the top, no prefix')
})

t.test('a cwd in no repository, or inside a bare one, is NOT_A_GIT_REPOSITORY', async (t) => {
  const dir = tempDir(t)
  await t.rejects(resolveRepository(dir), { name: 'NotAGitRepository', code: 'NOT_A_GIT_REPOSITORY' })
  const bare = join(dir, 'bare.git')
  callerGit(dir, 'init', '-q', '--bare', bare)
  await t.rejects(resolveRepository(bare), NotAGitRepository)
  // a bare repository committed inside a tree, its config saying its tree is elsewhere: never taken for the
  // repository of its cwd (safe.bareRepository), or /etc would be the run's repository
  const s = scene(t)
  callerGit(s.repo, 'init', '-q', '--bare', 'embedded')
  callerGit(join(s.repo, 'embedded'), 'config', 'core.bare', 'false')
  callerGit(join(s.repo, 'embedded'), 'config', 'core.worktree', '/etc')
  await t.rejects(resolveRepository(join(s.repo, 'embedded'), IDENTITY), NotAGitRepository)
})

t.test('the agent user may use a repository it does not own (safe.directory), and only on the command line',
  { skip: !asRoot && 'another user needs root' }, async (t) => {
    const s = scene(t)
    t.not(lstatSync(s.repo).uid, IDENTITY!.uid, 'the tree is the caller\'s')
    await t.resolves(resolveRepository(s.repo, IDENTITY))
    // without the service's safe.directory, git refuses it as the agent user
    await t.rejects(git(['rev-parse', '--show-toplevel'], { cwd: s.repo, identity: IDENTITY, safe: [] }),
      /dubious ownership/)
  })

t.test('base: a branch, a tag (annotated too), a sha, a short sha, HEAD~1', async (t) => {
  const s = scene(t)
  const first = callerGit(s.repo, 'rev-parse', 'HEAD').trim()
  callerGit(s.repo, 'tag', 'light')
  callerGit(s.repo, 'tag', '-a', '-m', 'annotated', 'v1')
  writeFiles(s.repo, { 'b.txt': 'b\n' })
  callerGit(s.repo, 'add', '-A')
  callerGit(s.repo, 'commit', '-q', '-m', 'second')
  callerGit(s.repo, 'branch', 'feature', first)
  const second = callerGit(s.repo, 'rev-parse', 'HEAD').trim()
  const { repository } = await resolveRepository(s.repo, IDENTITY)
  for (const [base, sha] of [
    ['HEAD', second], ['main', second], ['feature', first], ['light', first], ['v1', first], [first, first],
    [first.slice(0, 8), first], ['HEAD~1', first]
  ] as const) {
    t.equal(await resolveBase(repository, base, IDENTITY), sha, base)
  }
})

t.test('hostile bases are names that name nothing: BASE_NOT_FOUND, and nothing runs', async (t) => {
  const s = scene(t)
  const { repository } = await resolveRepository(s.repo, IDENTITY)
  const mark = join(s.markers, 'base')
  for (const base of [
    `--upload-pack=touch ${mark}`, `-c core.sshCommand=touch ${mark}`, '--output=/tmp/x', `HEAD; touch ${mark}`,
    `$(touch ${mark})`, '', 'nope', 'HEAD:README.md', `--exec=touch ${mark}`, '-h', '--help'
  ]) {
    await t.rejects(resolveBase(repository, base, IDENTITY), { name: 'BaseNotFound', code: 'BASE_NOT_FOUND' }, base)
  }
  t.same(marks(s, 'base'), [])
  t.notOk(existsSync('/tmp/x'))
  t.type(new BaseNotFound('x').message, 'string')
})

t.test('a worktree: detached at base, 0700 and the agent user\'s, the caller untouched', async (t) => {
  const s = scene(t, { 'a.txt': 'a\n' })
  const before = callerGit(s.repo, 'rev-parse', 'HEAD').trim()
  const branches = callerGit(s.repo, 'branch', '--list')
  const worktree = await worktreeOf(s)
  t.equal(worktree.path, join(s.root, worktree.path.split('/').at(-1)!))
  const stat = lstatSync(worktree.path)
  t.equal(stat.mode & 0o777, 0o700)
  if (IDENTITY !== undefined) t.same([stat.uid, stat.gid], [IDENTITY.uid, IDENTITY.gid])
  t.equal(readFileSync(join(worktree.path, 'a.txt'), 'utf8'), 'a\n')
  t.equal(worktree.base, before)
  t.equal(worktree.gitDir, join(s.repo, '.git', 'worktrees', worktree.path.split('/').at(-1)!))
  const head = await git(['symbolic-ref', '-q', 'HEAD'], {
    cwd: worktree.path, identity: IDENTITY, safe: [worktree.path], okExitCodes: [1]
  })
  t.equal(head.exitCode, 1, 'detached')
  t.equal(callerStatus(s), '')
  t.equal(callerGit(s.repo, 'branch', '--list'), branches)
  t.equal(callerGit(s.repo, 'rev-parse', 'HEAD').trim(), before)

  await removeWorktree(worktree)
  t.notOk(existsSync(worktree.path))
  t.notOk(existsSync(worktree.gitDir))
  t.notMatch(callerGit(s.repo, 'worktree', 'list'), worktree.path)
})

t.test('a worktree whose .git file its agent removed is still removed, entry and all', async (t) => {
  const s = scene(t)
  const worktree = await worktreeOf(s)
  execFileSync('rm', [join(worktree.path, '.git')])
  await removeWorktree(worktree)
  t.notOk(existsSync(worktree.path))
  t.notOk(existsSync(worktree.gitDir))
})

t.test('a run id that is not one path component is refused; a failed add leaves nothing', async (t) => {
  const s = scene(t)
  const { repository } = await resolveRepository(s.repo, IDENTITY)
  const base = await resolveBase(repository, 'HEAD', IDENTITY)
  for (const id of ['../x', 'a/b', '-x', '', '.git']) {
    await t.rejects(addWorktree({ repository, base, root: s.root, runId: id, identity: IDENTITY }), /not a worktree/)
  }
  const id = runId()
  await t.rejects(addWorktree({ repository, base: 'f'.repeat(40), root: s.root, runId: id, identity: IDENTITY }),
    GitFailed)
  t.notOk(existsSync(join(s.root, id)))
  t.notOk(existsSync(join(s.repo, '.git', 'worktrees', id)))
})

t.test('two worktrees of one repository each see their own edits only', async (t) => {
  const s = scene(t, { 'shared.txt': 'base\n' })
  const [one, two] = [await worktreeOf(s), await worktreeOf(s)]
  writeFileSync(join(one.path, 'shared.txt'), 'one\n')
  writeFileSync(join(two.path, 'only-two.txt'), 'two\n')
  t.equal(readFileSync(join(two.path, 'shared.txt'), 'utf8'), 'base\n')
  t.notOk(existsSync(join(one.path, 'only-two.txt')))
  t.equal(readFileSync(join(s.repo, 'shared.txt'), 'utf8'), 'base\n')
  t.equal(callerStatus(s), '')
})

t.test('at the start, worktrees no live run owns are removed and pruned; live ones kept', async (t) => {
  const s = scene(t)
  const [gone, live] = [await worktreeOf(s), await worktreeOf(s)]
  const stray = join(s.root, 'stray-file')
  writeFileSync(stray, '')
  const broken = join(s.root, 'broken')
  mkdirSync(broken)
  const liveName = live.path.split('/').at(-1)!
  const pruned = await pruneWorktrees(s.root, new Set([liveName]))
  t.same(pruned.sort(), ['broken', gone.path.split('/').at(-1)!, 'stray-file'].sort())
  t.notOk(existsSync(gone.path))
  t.notOk(existsSync(gone.gitDir))
  t.ok(existsSync(live.path))
  t.ok(existsSync(live.gitDir))
  t.equal(callerStatus(s), '')
  t.same(await pruneWorktrees(join(s.dir, 'no-such-root'), new Set()), [])
})

t.test('git missing from PATH is GitNotInstalled (503 GIT_NOT_INSTALLED)', async (t) => {
  const path = process.env['PATH']
  t.teardown(() => { process.env['PATH'] = path })
  process.env['PATH'] = tempDir(t)
  await t.rejects(resolveRepository('/'), { name: 'GitNotInstalled', code: 'GIT_NOT_INSTALLED' })
  t.ok(new GitNotInstalled() instanceof Error)
})

t.test('a call is bounded in time and in what it reads', async (t) => {
  const dir = tempDir(t)
  const fifo = join(dir, 'fifo')
  execFileSync('mkfifo', [fifo])
  // opening a FIFO nobody writes to blocks until the timeout kills the call
  await t.rejects(git(['hash-object', '--no-filters', fifo], { cwd: dir, safe: [], timeoutMs: 300 }),
    { name: 'GitFailed', reason: 'timeout' })
  await t.rejects(git(['version'], { cwd: dir, safe: [], maxOutputBytes: 4 }), { name: 'GitFailed', reason: 'output' })
  t.match(text(await git(['version'], { cwd: dir, safe: [] })), /^git version/)
})

t.test('the service\'s environment never reaches git: GIT_DIR, GIT_WORK_TREE, its config', async (t) => {
  const s = scene(t)
  const other = tempDir(t)
  callerGit(other, 'init', '-q')
  const saved = { ...process.env }
  t.teardown(() => { process.env = saved })
  Object.assign(process.env, {
    GIT_DIR: join(other, '.git'),
    GIT_WORK_TREE: other,
    GIT_CONFIG_PARAMETERS: "'core.hooksPath'='/tmp'",
    GIT_INDEX_FILE: join(other, 'index')
  })
  t.same((await resolveRepository(s.repo, IDENTITY)).repository, { topLevel: s.repo, commonDir: gitDirOf(s.repo) })
})

t.test('git with the agent user\'s groups (setpriv), for a repository shared through a group',
  { skip: !asRoot && 'another user needs root' }, async (t) => {
    const s = scene(t)
    execFileSync('chown', ['-R', '0:64300', s.repo])
    execFileSync('chmod', ['-R', 'g+rwX,o-rwx', s.repo])
    const grouped = { ...IDENTITY!, groups: [IDENTITY!.gid, 64_300] }
    t.same((await resolveRepository(s.repo, grouped)).repository, { topLevel: s.repo, commonDir: gitDirOf(s.repo) })
    await t.rejects(resolveRepository(s.repo, IDENTITY), NotAGitRepository, 'without the group, no way in')
    const path = process.env['PATH']
    t.teardown(() => { process.env['PATH'] = path })
    const gitBinary = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim()
    mkdirSync(join(s.dir, 'bin'))
    execFileSync('ln', ['-s', gitBinary, join(s.dir, 'bin', 'git')])
    process.env['PATH'] = join(s.dir, 'bin')
    await t.rejects(resolveRepository(s.repo, grouped), /setpriv is not on PATH/)
  })

import t, { type Test } from 'tap'
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { git } from '#src/workspaces/git.js'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { build, FIXTURE_BIN, refused, runTool, scenario, standInEnv, tempDir, waitFor } from '../helpers/index.js'
import { callerGit, callerStatus, marks, scene, worktreeList } from '../workspaces/repos.js'

// Worktree runs inside WSL (issue 39, item 4), on a Windows host as the stand-in wsl.exe shows it: every git the
// service runs, and every file of the worktree, in the distro through `wsl --exec`, as the run's distro user; the
// worktree under that user's own HOME, in the distro.

const ALICE = { authorization: 'Bearer secret-a' }
const IN_DISTRO = { wsl_distro: 'Ubuntu', wsl_user: 'dev' }

interface Distro {
  app: FastifyInstance
  /** The distro user's HOME: where its worktrees go. */
  home: string
  /** Where the service keeps its state: no worktree of a distro goes there. */
  dataDir: string
  /** The argv of every wsl.exe call that ran git, in order. */
  gitCalls: () => string[][]
  /** How many agents started. */
  starts: () => number
}

/** What the stand-in wsl.exe recorded: each call's argv. */
function wslCalls(log: string): string[][] {
  if (!existsSync(log)) return []
  return readFileSync(log, 'utf8').split('\n').filter((line) => line.startsWith('{"wsl_argv"'))
    .map((line) => (JSON.parse(line) as { wsl_argv: string[] }).wsl_argv)
}

/**
 * The service on a Windows host whose distro's home is a directory of the test's own. The service calls wsl.exe for
 * git with its own environment: the stand-in's knobs go there too, for this test's length.
 */
async function distro(t: Test, overrides: Record<string, string> = {}, dataDir = join(tempDir(t), 'data')):
Promise<Distro> {
  const home = overrides['HOME_IN_DISTRO'] ?? tempDir(t)
  const log = join(tempDir(t), 'wsl.log')
  const knobs = { WSL_STAND_IN_HOME: home, STAND_IN_LOG: log }
  const saved = Object.fromEntries(Object.keys(knobs).map((name) => [name, process.env[name]]))
  Object.assign(process.env, knobs)
  t.teardown(() => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) Reflect.deleteProperty(process.env, name)
      else process.env[name] = value
    }
  })
  const { HOME_IN_DISTRO: _home, ...config } = overrides
  const app = await build(t, {
    AGENT_HOST_PLATFORM: 'win32',
    WSL_BIN: join(FIXTURE_BIN, 'wsl'),
    API_TOKENS: 'alice:secret-a',
    DATA_DIR: dataDir,
    ...config
  }, standInEnv(knobs))
  const calls = (): string[][] => wslCalls(log)
  return {
    app,
    home,
    dataDir,
    gitCalls: () => calls().filter((argv) => argv.includes('env') && argv.includes('git')),
    starts: () => calls().filter((argv) => argv.includes('setsid')).length
  }
}

const worktreesIn = (d: Distro): string => join(d.home, '.agent-runner', 'worktrees')

t.test('inside WSL: the agent edits in a worktree under its distro user’s home, made and read back by the distro’s ' +
  'git as that user; the changeset exact, the caller’s tree untouched, the worktree gone', async (t) => {
  const d = await distro(t)
  const repo = scene(t, { 'README.md': 'hello\n', 'src/a.ts': 'a\n', 'old.txt': 'old\n', 'gone.txt': 'bye\n' })
  const result = await runTool(d.app, 'crush_run', {
    // from src/, where the caller is
    task: scenario.edit(
      'write:a.ts:a\\nb', 'write:../new.txt:new', 'delete:../gone.txt', 'rename:../old.txt:../moved.txt'
    ),
    cwd: join(repo.repo, 'src'),
    workspace: 'worktree',
    ...IN_DISTRO
  }, ALICE)
  t.equal(result.ok, true, result.output)
  const cwd = /edited (\S+)/.exec(result.output)![1]!
  const id = cwd.split('/').at(-2)!
  t.equal(cwd, join(worktreesIn(d), id, 'src'), 'in the distro user’s worktrees, in the caller’s subdirectory')
  t.same(result.changes!.files, [
    { path: 'gone.txt', status: 'deleted', additions: 0, deletions: 1, binary: false },
    { path: 'moved.txt', status: 'renamed', old_path: 'old.txt', additions: 0, deletions: 0, binary: false },
    { path: 'new.txt', status: 'added', additions: 1, deletions: 0, binary: false },
    { path: 'src/a.ts', status: 'modified', additions: 1, deletions: 0, binary: false }
  ])
  t.equal(result.changes!.base, callerGit(repo.repo, 'rev-parse', 'HEAD').trim())
  t.match(result.changes!.diff, /^\+b$/m)
  t.equal(callerStatus(repo), '', 'the caller’s working tree and index are as they were')
  t.notOk(existsSync(join(worktreesIn(d), id)), 'the worktree is gone')
  t.equal(worktreeList(repo).length, 1, 'and its entry in the caller’s repository')
  t.notOk(existsSync(join(d.dataDir, 'worktrees', id)), 'nothing of it under the service’s DATA_DIR')
  const calls = d.gitCalls()
  t.ok(calls.some((argv) => argv.includes('worktree') && argv.includes('add')), 'the worktree made in the distro')
  t.ok(calls.some((argv) => argv.includes('diff-index')), 'the changes read there')
  for (const argv of calls) {
    t.same(argv.slice(0, 9), ['-d', 'Ubuntu', '-u', 'dev', '--cd', '/', '--exec', 'env', '-i'],
      'git as the run’s distro user, in an environment of its own, never through a shell')
  }
})

t.test('what a caller names reaches the distro’s git as one argument through wsl.exe’s command line: a commit ' +
  'message of quotes, blanks and backslashes read back whole; a base like an option is a name; a hook and an ' +
  'fsmonitor the repository plants never run', async (t) => {
  const d = await distro(t)
  const repo = scene(t)
  for (const name of ['post-checkout', 'fsmonitor']) {
    writeFileSync(join(repo.dir, name), `#!/bin/sh\ntouch ${join(repo.markers, name)}\n`, { mode: 0o755 })
  }
  writeFileSync(join(repo.repo, '.git', 'hooks', 'post-checkout'), readFileSync(join(repo.dir, 'post-checkout')),
    { mode: 0o755 })
  callerGit(repo.repo, 'config', 'core.fsmonitor', join(repo.dir, 'fsmonitor'))
  callerGit(repo.repo, 'checkout', '-q', '--detach')
  t.same(marks(repo, 'post-checkout', 'fsmonitor'), ['post-checkout', 'fsmonitor'], 'the caller’s own git runs both')
  for (const name of readdirSync(repo.markers)) rmSync(join(repo.markers, name))
  const message = 'say "it" \\"twice\\" \\\\ and  spaces\\'
  const result = await runTool(d.app, 'crush_run', {
    task: scenario.edit('write:n.txt:n'),
    cwd: repo.repo,
    workspace: 'worktree',
    commit: { branch: 'from-wsl', message },
    ...IN_DISTRO
  }, ALICE)
  t.equal(result.changes!.branch, 'from-wsl')
  t.equal(callerGit(repo.repo, 'log', '-1', '--format=%B', 'from-wsl').replace(/\n+$/, ''), message)
  t.equal(callerGit(repo.repo, 'rev-parse', 'from-wsl').trim(), result.changes!.head)
  t.same(marks(repo, 'post-checkout', 'fsmonitor'), [], 'neither ran when the service made, read or committed it')
  const before = d.starts()
  for (const base of ['--upload-pack=touch /tmp/pwned', '-c', 'a "b" c']) {
    const { status, body } = await refused(d.app, 'crush_run', {
      task: 'x', cwd: repo.repo, workspace: 'worktree', base, ...IN_DISTRO
    }, ALICE)
    t.same([status, body.code], [400, 'BASE_NOT_FOUND'], base)
  }
  t.equal(d.starts(), before, 'no refused run started an agent')
})

t.test('refusals inside WSL, before any agent: a repository not named, a directory in none; Windows itself has ' +
  'no worktree yet', async (t) => {
  const d = await distro(t)
  const outside = tempDir(t)
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ workspace: 'worktree', ...IN_DISTRO }, 'VALIDATION_ERROR'],
    [{ workspace: 'worktree', cwd: outside, ...IN_DISTRO }, 'NOT_A_GIT_REPOSITORY'],
    [{ workspace: 'worktree', cwd: outside }, 'WORKSPACE_NOT_SUPPORTED']
  ]
  for (const [fields, code] of cases) {
    const answer = await refused(d.app, 'crush_run', { task: 'x', ...fields }, ALICE)
    t.same([answer.status, answer.body.code], [400, code], JSON.stringify(fields))
  }
  t.equal(d.starts(), 0, 'no agent started')
})

t.test('a follow-up continues in the same worktree in the distro, which goes with its session at a later start',
  async (t) => {
    const dataDir = join(tempDir(t), 'data')
    const home = tempDir(t)
    const d = await distro(t, { SESSIONS_RETENTION_MS: '60000', HOME_IN_DISTRO: home }, dataDir)
    const repo = scene(t)
    const first = await runTool(d.app, 'claude_run', {
      task: scenario.edit('write:first.txt:1'), cwd: repo.repo, workspace: 'worktree', ...IN_DISTRO
    }, ALICE)
    const path = first.changes!.worktree!
    t.equal(path.slice(0, worktreesIn(d).length), worktreesIn(d), 'kept in the distro for the session')
    const followUp = await runTool(d.app, 'claude_run', {
      task: scenario.edit('write:second.txt:2'), resume: first.session_id!
    }, ALICE)
    t.match(followUp.output, `edited ${path}`, 'the agent continued in the same directory')
    t.same(followUp.changes!.files.map((file) => file.path), ['first.txt', 'second.txt'])
    await d.app.close()
    await distro(t, { SESSIONS_RETENTION_MS: '1', HOME_IN_DISTRO: home }, dataDir)
    // Just after the start, never in it: a distro's wsl.exe round trips do not hold the service up.
    await waitFor(() => !existsSync(path) && worktreeList(repo).length === 1, 15_000,
      'the next start to remove it inside the distro, with its entry in the caller’s repository')
    t.equal(callerStatus(repo), '')
  })

t.test('a distro without git: what `env` answers for a program it cannot find (127) is GIT_NOT_INSTALLED',
  async (t) => {
    // wsl.exe hands back the Linux side's exit status: here a distro whose env found no git.
    const wslBin = join(tempDir(t), 'wsl')
    writeFileSync(wslBin, '#!/bin/sh\necho "env: \'git\': No such file or directory" >&2\nexit 127\n', { mode: 0o755 })
    const call = { cwd: '/src', safe: [], identity: { wslBin, distro: 'Ubuntu', user: 'dev' } }
    await t.rejects(git(['rev-parse', 'HEAD'], call), { code: 'GIT_NOT_INSTALLED' })
    const d = await distro(t, { WSL_BIN: wslBin })
    const answer = await refused(d.app, 'crush_run', {
      task: 'x', cwd: '/src', workspace: 'worktree', ...IN_DISTRO
    }, ALICE)
    t.same([answer.status, answer.body.code], [503, 'GIT_NOT_INSTALLED'], 'the run refused before any agent')
  })

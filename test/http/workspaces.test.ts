import t, { type Test } from 'tap'
import { once } from 'node:events'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import {
  build, call, createRun, getRun, isAlive, readPidFile, refused, runTool, scenario, settled, standInEnv, startServer,
  tempDir
} from '../helpers/index.js'
import { callerGit, callerStatus, scene, worktreeList, writeFiles, type Scene } from '../workspaces/repos.js'

// Worktree runs (issue 39) through the API: each run's agent (a stand-in editing files as an agent's tools do) in a
// worktree of its own, made by real git from a real repository; what it changed comes back as a changeset.

const ALICE = { authorization: 'Bearer secret-a' }
const BOB = { authorization: 'Bearer secret-b' }

interface Service {
  app: FastifyInstance
  /** Every start of a stand-in, one line each: a refused run started none. */
  starts: () => number
  dataDir: string
}

async function service(t: Test, overrides: Record<string, string> = {}, dataDir = join(tempDir(t), 'data')):
Promise<Service> {
  const log = join(tempDir(t), 'starts.log')
  const app = await build(
    t,
    { API_TOKENS: 'alice:secret-a,bob:secret-b', DATA_DIR: dataDir, MAX_CRUSH_AGENTS: '4', ...overrides },
    standInEnv({ HOME: tempDir(t), STAND_IN_LOG: log })
  )
  const starts = (): number => existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0
  return { app, starts, dataDir }
}

const worktreesOf = (s: Service): string => join(s.dataDir, 'worktrees')
const branches = (repo: Scene): string[] =>
  callerGit(repo.repo, 'for-each-ref', '--format=%(refname:short)', 'refs/heads').split('\n').filter(Boolean)

t.test('a worktree run: the agent edits, adds, deletes and renames in a worktree of its own; the changeset is exact, ' +
  'the caller’s tree untouched, the worktree gone at the end', async (t) => {
  const s = await service(t)
  const repo = scene(t, { 'README.md': 'hello\n', 'src/a.ts': 'a\n', 'old.txt': 'old\n', 'gone.txt': 'bye\n' })
  const result = await runTool(s.app, 'crush_run', {
    task: scenario.edit('write:src/a.ts:a\\nb', 'write:new.txt:new', 'delete:gone.txt', 'rename:old.txt:moved.txt'),
    cwd: repo.repo,
    workspace: 'worktree'
  }, ALICE)
  t.equal(result.ok, true)
  const cwd = /edited (\S+)/.exec(result.output)![1]!
  t.equal(cwd, join(worktreesOf(s), cwd.slice(cwd.lastIndexOf('/') + 1)), 'the agent worked in the service’s worktree')
  const changes = result.changes!
  t.equal(changes.base, callerGit(repo.repo, 'rev-parse', 'HEAD').trim())
  t.same(changes.files, [
    { path: 'gone.txt', status: 'deleted', additions: 0, deletions: 1, binary: false },
    { path: 'moved.txt', status: 'renamed', old_path: 'old.txt', additions: 0, deletions: 0, binary: false },
    { path: 'new.txt', status: 'added', additions: 1, deletions: 0, binary: false },
    { path: 'src/a.ts', status: 'modified', additions: 1, deletions: 0, binary: false }
  ])
  t.match(changes.diff, /^diff --git a\/gone.txt b\/gone.txt$/m)
  t.match(changes.diff, /^\+b$/m)
  t.equal(changes.diff_bytes, Buffer.byteLength(changes.diff))
  t.equal(changes.diff_truncated, false)
  t.same([changes.head, changes.branch, changes.worktree], [null, null, null], 'no commit, no branch, not kept')
  t.equal(callerStatus(repo), '', 'the caller’s working tree and index are as they were')
  t.equal(readFileSync(join(repo.repo, 'src/a.ts'), 'utf8'), 'a\n')
  t.notOk(existsSync(cwd), 'the worktree is gone')
  t.equal(worktreeList(repo).length, 1, 'and so is its entry in the caller’s repository')
})

t.test('an agent started in a subdirectory of the repository works in the same subdirectory of its worktree',
  async (t) => {
    const s = await service(t)
    const repo = scene(t, { 'pkg/index.ts': 'x\n' })
    const result = await runTool(s.app, 'crush_run', {
      task: scenario.edit('write:added.ts:y'), cwd: join(repo.repo, 'pkg'), workspace: 'worktree'
    }, ALICE)
    t.match(result.output, /edited \S+\/pkg$/m)
    t.same(result.changes!.files.map((file) => file.path), ['pkg/added.ts'])
  })

t.test('two runs on one repository at once each see only their own edits', async (t) => {
  const s = await service(t)
  const repo = scene(t)
  const [one, two] = await Promise.all(['one', 'two'].map((name) =>
    runTool(s.app, 'crush_run', {
      task: scenario.edit(`write:${name}.txt:${name}`, 'write:README.md:mine'), cwd: repo.repo, workspace: 'worktree'
    }, ALICE)))
  t.same(one!.changes!.files.map((file) => file.path), ['README.md', 'one.txt'])
  t.same(two!.changes!.files.map((file) => file.path), ['README.md', 'two.txt'])
  t.equal(callerStatus(repo), '')
})

t.test('base: a tag, a sha, a branch; a name that looks like an option is a name', async (t) => {
  const s = await service(t)
  const repo = scene(t, { 'v.txt': '1\n' })
  const first = callerGit(repo.repo, 'rev-parse', 'HEAD').trim()
  callerGit(repo.repo, 'tag', 'v1')
  callerGit(repo.repo, 'branch', 'stable')
  writeFiles(repo.repo, { 'v.txt': '2\n' })
  callerGit(repo.repo, 'commit', '-qam', 'second')
  for (const base of ['v1', first, 'stable', 'HEAD~1']) {
    const result = await runTool(s.app, 'crush_run', {
      task: scenario.edit('write:w.txt:w'), cwd: repo.repo, workspace: 'worktree', base
    }, ALICE)
    t.equal(result.changes!.base, first, `${base} is the first commit`)
  }
  const before = s.starts()
  for (const base of ['--upload-pack=touch /tmp/pwned', '-c', 'nope', 'HEAD~5']) {
    const { status, body } = await refused(s.app, 'crush_run', {
      task: 'x', cwd: repo.repo, workspace: 'worktree', base
    }, ALICE)
    t.equal(status, 400)
    t.match(body, { code: 'BASE_NOT_FOUND', message: `body/base: ${JSON.stringify(base)} names no commit` })
  }
  t.equal(s.starts(), before, 'no refused run started an agent')
})

t.test('refusals before any agent: no repository, options without a worktree, a bad or taken branch', async (t) => {
  const s = await service(t)
  const repo = scene(t)
  callerGit(repo.repo, 'branch', 'taken')
  const outside = tempDir(t)
  const cases: Array<[Record<string, unknown>, number, string]> = [
    [{ cwd: outside, workspace: 'worktree' }, 400, 'NOT_A_GIT_REPOSITORY'],
    [{ cwd: repo.repo, base: 'HEAD' }, 400, 'VALIDATION_ERROR'],
    [{ cwd: repo.repo, workspace: 'cwd', keep: 'always' }, 400, 'VALIDATION_ERROR'],
    [{ cwd: repo.repo, commit: {} }, 400, 'VALIDATION_ERROR'],
    [{ cwd: repo.repo, workspace: 'worktree', commit: { branch: 'a..b' } }, 400, 'INVALID_BRANCH_NAME'],
    [{ cwd: repo.repo, workspace: 'worktree', commit: { branch: '-x' } }, 400, 'INVALID_BRANCH_NAME'],
    [{ cwd: repo.repo, workspace: 'worktree', commit: { branch: 'refs/heads/main' } }, 400, 'INVALID_BRANCH_NAME'],
    [{ cwd: repo.repo, workspace: 'worktree', commit: { branch: '@' } }, 400, 'INVALID_BRANCH_NAME'],
    [{ cwd: repo.repo, workspace: 'worktree', commit: { branch: 'taken' } }, 409, 'BRANCH_EXISTS'],
    [{ cwd: repo.repo, workspace: 'elsewhere' }, 400, 'VALIDATION_ERROR']
  ]
  for (const [fields, status, code] of cases) {
    const answer = await refused(s.app, 'crush_run', { task: 'x', ...fields }, ALICE)
    t.same([answer.status, answer.body.code], [status, code], JSON.stringify(fields))
  }
  t.match(await refused(s.app, 'crush_run', {
    task: 'x', cwd: repo.repo, workspace: 'worktree', commit: { branch: 'refs/heads/main' }
  }, ALICE), { body: { message: /^body\/commit\/branch: "refs\/heads\/main" would be read as another ref/ } },
  'the message says why')
  t.equal(s.starts(), 0, 'no agent started')
  t.same(branches(repo), ['main', 'taken'])
})

t.test('commit: the changes on a new branch of the caller’s repository, by the service’s author', async (t) => {
  const s = await service(t, { WORKSPACE_COMMIT_AUTHOR: 'Runner Bot <bot@example.com>' })
  const repo = scene(t)
  const named = await runTool(s.app, 'crush_run', {
    task: scenario.edit('write:feature.txt:f'),
    cwd: repo.repo,
    workspace: 'worktree',
    commit: { branch: 'feature/x', message: 'Add the feature' }
  }, ALICE)
  const changes = named.changes!
  t.equal(changes.branch, 'feature/x')
  t.equal(callerGit(repo.repo, 'rev-parse', 'feature/x').trim(), changes.head)
  t.equal(callerGit(repo.repo, 'log', '-1', '--format=%an <%ae>|%cn|%s', 'feature/x').trim(),
    'Runner Bot <bot@example.com>|Runner Bot|Add the feature')
  t.equal(callerGit(repo.repo, 'show', 'feature/x:feature.txt'), 'f')
  t.equal(callerStatus(repo), '', 'the caller’s checkout did not move')
  t.equal(callerGit(repo.repo, 'rev-parse', '--abbrev-ref', 'HEAD').trim(), 'main')
  const unnamed = await runTool(s.app, 'crush_run', {
    task: scenario.edit('write:other.txt:o'), cwd: repo.repo, workspace: 'worktree', commit: {}
  }, ALICE)
  t.match(unnamed.changes!.branch, /^agent-runner\/[0-9a-f-]{36}$/)
  t.equal(callerGit(repo.repo, 'show', `${unnamed.changes!.branch!}:other.txt`), 'o')
  const again = await refused(s.app, 'crush_run', {
    task: 'x', cwd: repo.repo, workspace: 'worktree', commit: { branch: 'feature/x' }
  }, ALICE)
  t.same([again.status, again.body.code], [409, 'BRANCH_EXISTS'])
})

t.test('keep: "always" leaves the worktree to the caller, and no later start of the service removes it', async (t) => {
  const dataDir = join(tempDir(t), 'data')
  const s = await service(t, {}, dataDir)
  const repo = scene(t)
  const result = await runTool(s.app, 'crush_run', {
    task: scenario.edit('write:kept.txt:k'), cwd: repo.repo, workspace: 'worktree', keep: 'always'
  }, ALICE)
  const path = result.changes!.worktree!
  t.equal(readFileSync(join(path, 'kept.txt'), 'utf8'), 'k')
  t.equal(statSync(path).mode & 0o777, 0o700, 'its directory is its agent’s alone')
  await s.app.close()
  t.ok(existsSync(join(path, 'kept.txt')), 'closed')
  await service(t, {}, dataDir)
  t.ok(existsSync(join(path, 'kept.txt')), 'still there after a restart')
})

t.test('an async run reports its worktree while it runs, its changes once ended; its whole diff is its caller’s',
  async (t) => {
    const s = await service(t, { WORKSPACE_DIFF_LIMIT_BYTES: '1024' })
    const repo = scene(t)
    const lines = Array.from({ length: 200 }, (_, i) => `line-${i}`).join('\\n')
    const created = await createRun(s.app, {
      tool: 'crush_run', task: scenario.edit(`write:big.txt:${lines}`), cwd: repo.repo, workspace: 'worktree'
    }, ALICE)
    const state = await settled(s.app, created.id, 10_000, ALICE)
    t.match(state.workspace, { kind: 'worktree', path: join(worktreesOf(s), created.id), base: /^[0-9a-f]{40}$/ })
    const changes = state.result!.changes!
    t.equal(changes.diff_truncated, true)
    t.ok(Buffer.byteLength(changes.diff) <= 1024, 'the result holds the diff’s head')
    t.ok(changes.diff.endsWith('\n'), 'cut at a line’s end')
    const whole = await s.app.inject({ method: 'GET', url: `/runs/${created.id}/diff`, headers: ALICE })
    t.equal(whole.statusCode, 200)
    t.match(whole.headers['content-type'], /^text\/x-diff/)
    t.equal(whole.rawPayload.length, changes.diff_bytes, 'the whole diff')
    t.ok(whole.body.startsWith(changes.diff))
    t.match(whole.body, /^\+line-199$/m)
    const bobs = await call(s.app, 'GET', `/runs/${created.id}/diff`, { headers: BOB })
    t.same([bobs.status, bobs.body.code], [404, 'DIFF_NOT_FOUND'], 'another token reads no diff of alice’s')
    t.equal((await getRun(s.app, created.id, ALICE)).workspace?.path, join(worktreesOf(s), created.id))
  })

t.test('a run in cwd has no changes and no diff', async (t) => {
  const s = await service(t)
  const result = await runTool(s.app, 'crush_run', { task: 'hello', cwd: tempDir(t) }, ALICE)
  t.equal(result.changes, null)
})

t.test('a follow-up of a worktree run continues in the same worktree, which lives as long as its session',
  async (t) => {
    const s = await service(t)
    const repo = scene(t)
    const first = await runTool(s.app, 'claude_run', {
      task: scenario.edit('write:first.txt:1'), cwd: repo.repo, workspace: 'worktree'
    }, ALICE)
    const path = first.changes!.worktree!
    t.ok(first.session_id !== null && existsSync(path), 'kept for the session the agent left')
    const followUp = await runTool(s.app, 'claude_run', {
      task: scenario.edit('write:second.txt:2'), resume: first.session_id!
    }, ALICE)
    t.match(followUp.output, `edited ${path}`, 'the agent continued in the same directory')
    t.same(
      followUp.changes!.files.map((file) => file.path), ['first.txt', 'second.txt'], 'its changes since the same base'
    )
    t.same([followUp.changes!.base, followUp.changes!.worktree], [first.changes!.base, path])
    const mismatch = await refused(s.app, 'claude_run', {
      task: 'x', resume: first.session_id!, workspace: 'cwd'
    }, ALICE)
    t.same([mismatch.status, mismatch.body.code], [400, 'RESUME_PLACE_MISMATCH'])
    t.equal(callerStatus(repo), '')
  })

t.test('a session’s worktree goes with its session: past SESSIONS_RETENTION_MS, the next sweep removes it',
  async (t) => {
    const dataDir = join(tempDir(t), 'data')
    const s = await service(t, { SESSIONS_RETENTION_MS: '1' }, dataDir)
    const repo = scene(t)
    const first = await runTool(s.app, 'claude_run', {
      task: scenario.edit('write:first.txt:1'), cwd: repo.repo, workspace: 'worktree'
    }, ALICE)
    const path = first.changes!.worktree!
    t.ok(existsSync(path))
    await s.app.close()
    await service(t, { SESSIONS_RETENTION_MS: '1' }, dataDir)
    t.notOk(existsSync(path), 'removed at the next start')
    t.equal(worktreeList(repo).length, 1, 'with its entry in the caller’s repository')
  })

t.test('a service killed mid-run: its next start removes the run’s worktree and prunes its entry', async (t) => {
  const dataDir = tempDir(t)
  const repo = scene(t)
  const pidFile = join(tempDir(t), 'agent.pid')
  const first = await startServer(t, { DATA_DIR: dataDir })
  const { id } = await createRun(first.base, {
    tool: 'crush_run', task: scenario.hold(pidFile), cwd: repo.repo, workspace: 'worktree'
  })
  const agent = await readPidFile(pidFile)
  const path = join(dataDir, 'worktrees', id)
  t.ok(existsSync(path), 'the run’s worktree, while it runs')
  const exited = once(first.child, 'exit')
  first.child.kill('SIGKILL')
  await exited
  const second = await startServer(t, { DATA_DIR: dataDir })
  t.notOk(isAlive(agent), 'its agent stopped')
  t.notOk(existsSync(path), 'its worktree removed')
  t.equal(worktreeList(repo).length, 1, 'and its entry in the caller’s repository pruned')
  t.ok(second.logs.some((entry) => /removed 1 worktree/.test(String(entry['msg']))), 'the start says so')
})

t.test('an agent that cannot start leaves no worktree behind', async (t) => {
  const s = await service(t, { CRUSH_BIN: '/nonexistent/crush' })
  const repo = scene(t)
  const answer = await refused(s.app, 'crush_run', { task: 'x', cwd: repo.repo, workspace: 'worktree' }, ALICE)
  t.same([answer.status, answer.body.code], [503, 'AGENT_NOT_INSTALLED'])
  t.same(readdirSync(worktreesOf(s)), [], 'its worktree removed')
  t.equal(worktreeList(repo).length, 1, 'and its entry')
})

t.test('a branch made while the agent ran: the run’s result says the commit failed, the work is still reported',
  async (t) => {
    const s = await service(t)
    const repo = scene(t)
    const result = await runTool(s.app, 'crush_run', {
      // The agent makes the branch itself (its worktree shares the caller's branches) before it ends.
      task: scenario.shell('git', '-c', 'safe.directory=*', 'branch', 'late'),
      cwd: repo.repo,
      workspace: 'worktree',
      commit: { branch: 'late' }
    }, ALICE)
    t.match(result, { ok: true, changes: { branch: null, error: /branch late exists already/ } })
    t.equal(
      callerGit(repo.repo, 'rev-parse', 'late').trim(), result.changes!.base, 'the branch the agent made is untouched'
    )
  })

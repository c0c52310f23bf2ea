import t from 'tap'
import { execFileSync } from 'node:child_process'
import { statSync } from 'node:fs'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { build, crossableDataDir, runTool, scenario, standInEnv } from '../helpers/index.js'
import { asRoot } from '../helpers/users.js'
import { callerStatus, scene } from '../workspaces/repos.js'

// Worktree runs of two tokens (issues 36 and 39): each run's git and agent are its token's user, its worktree that
// user's alone, and the other token's agent cannot enter it. Its uid range is its own: files run side by side, and a
// service sweeps every process of its range's uids.

const ALICE = { authorization: 'Bearer secret-a' }
const BOB = { authorization: 'Bearer secret-b' }
const TOKENS = { API_TOKENS: 'alice:secret-a,bob:secret-b', ALLOW_SHARED_AGENT_USER: 'false' }

const uidOf = async (app: FastifyInstance, headers: typeof ALICE): Promise<number> =>
  (JSON.parse((await runTool(app, 'crush_run', { task: scenario.whoami() }, headers)).output.split('\n')[0]!) as
    { uid: number }).uid

t.test('a token’s worktree run: its git and agent are the token’s user, its worktree that user’s alone, and another ' +
  'token’s agent cannot enter it', { skip: !asRoot && 'AGENT_USERS needs root' }, async (t) => {
  const app = await build(
    t, { ...TOKENS, AGENT_USERS: '61590-61599', DATA_DIR: crossableDataDir(t) }, standInEnv({ HOME: '/nonexistent' })
  )
  const alice = await uidOf(app, ALICE)
  const repo = scene(t)
  // Shared with alice's user, as an operator gives a repository to a token's agents.
  execFileSync('chown', ['-R', `${alice}:${alice}`, repo.repo])
  const result = await runTool(app, 'crush_run', {
    task: scenario.edit('write:mine.txt:m'), cwd: repo.repo, workspace: 'worktree', keep: 'always'
  }, ALICE)
  const path = result.changes!.worktree!
  t.match(statSync(path), { uid: alice, gid: alice }, 'the worktree is alice’s user’s')
  t.equal(statSync(path).mode & 0o777, 0o700)
  t.match(statSync(join(path, 'mine.txt')), { uid: alice }, 'what her agent wrote, written as her user')
  t.same(result.changes!.files.map((file) => file.path), ['mine.txt'])
  const bobs = await runTool(app, 'crush_run', { task: scenario.shell('ls', path) }, BOB)
  t.match(bobs.output, /Permission denied/, 'bob’s agent cannot list it')
  t.equal(callerStatus(repo), '')
})

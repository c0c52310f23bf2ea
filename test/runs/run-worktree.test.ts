import t from 'tap'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { RunWorktrees } from '#src/runs/run-worktree.js'
import type { SessionStore } from '#src/runs/stores/run-store.js'
import { FIXTURE_BIN, tempDir, waitFor } from '../helpers/index.js'
import { callerGit, scene, worktreeList } from '../workspaces/repos.js'

// The sweep of a running service: worktrees whose session has gone, and records it cannot read, go without a restart.

const settings = (dir: string) => ({
  worktreesDir: join(dir, 'worktrees'),
  stateDir: dir,
  diffLimitBytes: 1024,
  diffRetentionMs: 60_000,
  author: { name: 'a', email: 'a@example.com' },
  hostPlatform: 'linux' as const,
  wslBin: 'wsl',
  sweepEveryMs: 20
})

/** Sessions a test ends when it says. */
function sessions(alive: Set<string>): SessionStore {
  return {
    session: async (tool, id) => alive.has(id)
      ? { id, tool, caller: 'alice', cwd: null, wslDistro: null, wslUser: null, updatedAt: new Date().toISOString() }
      : undefined,
    saveSession: async () => true,
    claimSession: async () => true,
    releaseSession: async () => undefined
  }
}

/** What the service leaves of a worktree kept for a session (its directory, its record). */
function keptFor(dir: string, name: string, record: string): string {
  const path = join(dir, 'worktrees', name)
  mkdirSync(path, { recursive: true })
  mkdirSync(join(dir, 'worktree-records'), { recursive: true })
  writeFileSync(join(dir, 'worktree-records', `${name}.json`), record)
  return path
}

t.test('while the service runs, a worktree goes once its session has, and one whose record cannot be read',
  async (t) => {
    const dir = tempDir(t)
    const worktrees = new RunWorktrees(settings(dir))
    t.teardown(() => { worktrees.stop() })
    const alive = new Set(['s1'])
    const kept = keptFor(dir, 'run-1', JSON.stringify({ session: { tool: 'claude_run', id: 's1' } }))
    const garbled = keptFor(dir, 'run-2', '{not json')
    const errors: unknown[] = []
    const removed = await worktrees.start(sessions(alive), (error) => errors.push(error))
    t.same(removed, ['run-2'], 'the unreadable one at once')
    t.notOk(existsSync(garbled))
    t.ok(existsSync(kept), 'the session’s, while it lasts')
    alive.delete('s1')
    await waitFor(() => !existsSync(kept), 5000, 'the next sweep to remove it')
    t.same(errors, [])
  })

t.test('a distro’s worktree whose run ended with the service (no session in its record) goes at the next sweep, ' +
  'inside the distro; while wsl.exe cannot reach it, its record waits for a later sweep', async (t) => {
  const dir = tempDir(t)
  const repo = scene(t)
  const path = join(tempDir(t), 'run-9')
  callerGit(repo.repo, 'worktree', 'add', '-q', '--detach', path)
  const repository = { topLevel: repo.repo, commonDir: join(repo.repo, '.git') }
  mkdirSync(join(dir, 'worktree-records'))
  writeFileSync(join(dir, 'worktree-records', 'run-9.json'),
    JSON.stringify({ distro: { name: 'Ubuntu', user: 'dev', path, repository } }))
  const unreachable = new RunWorktrees({ ...settings(dir), wslBin: join(tempDir(t), 'no-wsl') })
  t.same(await unreachable.sweep(sessions(new Set())), [], 'nothing removed while the distro cannot be reached')
  t.ok(existsSync(path))
  t.ok(existsSync(join(dir, 'worktree-records', 'run-9.json')), 'its record kept')
  const reachable = new RunWorktrees({ ...settings(dir), wslBin: join(FIXTURE_BIN, 'wsl') })
  t.same(await reachable.sweep(sessions(new Set())), ['run-9'])
  t.notOk(existsSync(path), 'removed through wsl.exe')
  t.notOk(existsSync(join(dir, 'worktree-records', 'run-9.json')), 'its record with it')
  t.equal(worktreeList(repo).length, 1, 'its entry pruned')
})

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
    t.teardown(() => worktrees.stop())
    const alive = new Set(['s1'])
    const kept = keptFor(dir, 'run-1', JSON.stringify({ session: { tool: 'claude_run', id: 's1' } }))
    const garbled = keptFor(dir, 'run-2', '{not json')
    const errors: unknown[] = []
    const removed = await worktrees.start(sessions(alive), {
      warn: (details, message) => { if (message === 'worktrees not swept') errors.push(details) }
    })
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

t.test('a distro’s leftovers never hold up the service’s start: removed just after, and told', async (t) => {
  const dir = tempDir(t)
  const repo = scene(t)
  const path = join(tempDir(t), 'run-7')
  callerGit(repo.repo, 'worktree', 'add', '-q', '--detach', path)
  mkdirSync(join(dir, 'worktree-records'))
  const repository = { topLevel: repo.repo, commonDir: join(repo.repo, '.git') }
  writeFileSync(join(dir, 'worktree-records', 'run-7.json'),
    JSON.stringify({ distro: { name: 'Ubuntu', user: 'dev', path, repository } }))
  // A wsl.exe that answers only once the gate opens: a distro slow to wake, as a real one can be.
  const gate = join(tempDir(t), 'open')
  const slowWsl = join(tempDir(t), 'wsl')
  const script = `#!/bin/sh\nwhile [ ! -e ${gate} ]; do sleep 0.05; done\nexec ${join(FIXTURE_BIN, 'wsl')} "$@"\n`
  writeFileSync(slowWsl, script, { mode: 0o755 })
  const worktrees = new RunWorktrees({ ...settings(dir), wslBin: slowWsl, sweepEveryMs: 60_000 })
  t.teardown(() => worktrees.stop())
  const told: string[][] = []
  const errors: unknown[] = []
  const started = worktrees.start(sessions(new Set()), {
    warn: (details, message) => {
      if (message === 'worktrees not swept') errors.push(details)
      else told.push((details as { worktrees: string[] }).worktrees)
    }
  })
  const bound = new Promise((resolve) => { setTimeout(resolve, 20_000, 'held up').unref() })
  t.same(await Promise.race([started, bound]), [], 'started while the distro had not answered')
  t.ok(existsSync(path), 'its leftover still there')
  writeFileSync(gate, '')
  await waitFor(() => !existsSync(path), 15_000, 'the leftover to go')
  await waitFor(() => told.length > 0, 5000, 'its removal to be told')
  t.same(told, [['run-7']])
  t.equal(worktreeList(repo).length, 1, 'its entry pruned')
  t.same(errors, [])
})

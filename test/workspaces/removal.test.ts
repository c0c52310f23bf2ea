import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { pruneWorktrees } from '#src/workspaces/worktree.js'
import { worktreeFiles } from '#src/workspaces/worktree-files.js'
import { fromRoot, tempDir, until } from '../helpers/index.js'
import { asRoot } from '../helpers/users.js'

// The service, as root, never walks what an agent controls (issue 59, item 2): an agent's worktree is emptied as its
// owner's uid, and only its directory, then empty, removed by root. An agent swapping a directory and a symlink to a
// root-only directory inside it (renameat2's RENAME_EXCHANGE) while the service removes it must not reach that
// directory, however the walk and the swaps interleave.

const AGENT = { uid: 64_202, gid: 64_202 }
const SWAPPER = fromRoot('test/fixtures/swap-forever.py')
/** Removals tried while the swaps run: a walk that follows a swapped-in symlink even once empties the secret. */
const ATTEMPTS = 20

interface Trap {
  /** A worktree root as the service makes it (root's, 0711), holding the agent's worktrees. */
  root: string
  /** A directory only root may read, which no removal may touch. */
  secret: string
}

function trap(t: Test): Trap {
  const dir = tempDir(t)
  chmodSync(dir, 0o711)
  const secret = join(dir, 'secret')
  mkdirSync(secret, { mode: 0o700 })
  for (let i = 0; i < 200; i++) writeFileSync(join(secret, `file-${i}`), 'root only\n')
  const root = join(dir, 'worktrees')
  mkdirSync(root, { mode: 0o711 })
  return { root, secret }
}

/**
 * The agent's worktree: a directory of entries named as the secret's and a symlink to the secret, swapped as fast as it
 * can (a walk that deletes its entries by path deletes the secret's whenever the symlink stands there).
 */
async function swappingWorktree(t: Test, { root, secret }: Trap, name: string): Promise<{
  worktree: string
  stop: () => Promise<void>
}> {
  const worktree = join(root, name)
  const deep = join(worktree, 'a', 'b')
  mkdirSync(join(deep, 'd'), { recursive: true })
  for (let i = 0; i < 200; i++) writeFileSync(join(deep, 'd', `file-${i}`), 'x')
  symlinkSync(secret, join(deep, 's'))
  for (const path of [worktree, join(worktree, 'a'), deep, join(deep, 'd')]) chownSync(path, AGENT.uid, AGENT.gid)
  for (const entry of readdirSync(join(deep, 'd'))) chownSync(join(deep, 'd', entry), AGENT.uid, AGENT.gid)
  const swapper = spawn('/usr/bin/python3', [SWAPPER, join(deep, 'd'), join(deep, 's'), join(worktree, 'ready')], {
    uid: AGENT.uid, gid: AGENT.gid, stdio: 'ignore'
  })
  const stop = async (): Promise<void> => {
    if (swapper.exitCode !== null || swapper.signalCode !== null) return
    const exited = once(swapper, 'exit')
    swapper.kill('SIGKILL')
    await exited
  }
  t.teardown(stop)
  await until(() => existsSync(join(worktree, 'ready')) || swapper.exitCode !== null, Boolean, 10_000, 'the swaps')
  t.equal(swapper.exitCode, null, 'the agent swaps')
  return { worktree, stop }
}

t.test('a worktree removed while its agent swaps a directory and a symlink to a root-only directory: the directory ' +
  'untouched, the worktree gone', { skip: asRoot ? false : 'needs root, to be the service and another uid' },
async (t) => {
  const scene = trap(t)
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const { worktree, stop } = await swappingWorktree(t, scene, `run-${attempt}`)
    // Whatever the swaps left half-done may fail this first removal: it is the secret that must hold.
    await worktreeFiles(AGENT).remove(worktree).catch(() => undefined)
    await stop()
    t.equal(readdirSync(scene.secret).length, 200, `attempt ${attempt}: the secret holds all it held`)
    await worktreeFiles(AGENT).remove(worktree)
    t.notOk(existsSync(worktree), `attempt ${attempt}: the worktree is gone`)
    if (readdirSync(scene.secret).length !== 200) break
  }
})

t.test('the sweep at start does the same for what no live run owns', {
  skip: asRoot ? false : 'needs root, to be the service and another uid'
}, async (t) => {
  const scene = trap(t)
  const swapping = []
  for (let attempt = 0; attempt < 8; attempt++) swapping.push(await swappingWorktree(t, scene, `left-${attempt}`))
  await pruneWorktrees(scene.root, new Set())
  for (const { stop } of swapping) await stop()
  t.equal(readdirSync(scene.secret).length, 200, 'the secret holds all it held')
  t.same(await pruneWorktrees(scene.root, new Set()).then(() => readdirSync(scene.root)), [], 'every leftover gone')
})

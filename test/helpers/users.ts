import { execFileSync } from 'node:child_process'
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'

/** What a test's user may do with the real sudo (Debian's package): ask for a password, or not. */
export type SudoRights = 'password' | 'nopasswd'

export interface RealUser {
  name: string
  uid: number
  gid: number
}

export const asRoot = process.getuid?.() === 0
export const realSudoInstalled = (() => {
  try {
    execFileSync('sudo', ['-V'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})()

/**
 * A real account (useradd) with a sudoers rule of its own, made once per machine and kept: users are cheap, and a
 * rule is rewritten each time so that it is always the one the test names. Needs root.
 */
export function realUser(name: string, sudo: SudoRights): RealUser {
  try {
    execFileSync('id', ['-u', name], { stdio: 'ignore' })
  } catch {
    execFileSync('useradd', ['--create-home', '--shell', '/bin/bash', name])
  }
  // A password that nobody types: sudo must ask for one, and never get it.
  execFileSync('chpasswd', { input: `${name}:${name}-${process.pid}-unused\n` })
  const rule = join('/etc/sudoers.d', `agent-runner-test-${name}`)
  writeFileSync(rule, `${name} ALL=(ALL:ALL) ${sudo === 'nopasswd' ? 'NOPASSWD: ' : ''}ALL\n`, { mode: 0o440 })
  execFileSync('visudo', ['-cf', rule], { stdio: 'ignore' })
  const id = (flag: string) => Number(execFileSync('id', [flag, name], { encoding: 'utf8' }).trim())
  return { name, uid: id('-u'), gid: id('-g') }
}

/** A directory the user owns, in a parent anyone may cross (a test's own temp dirs are 0700, root's). */
export function directoryOf(t: Test, user: RealUser): string {
  const parent = mkdtempSync(join(tmpdir(), 'agent-runner-user-'))
  chmodSync(parent, 0o755)
  t.teardown(() => rmSync(parent, { recursive: true, force: true }))
  const dir = join(parent, user.name)
  execFileSync('install', ['-d', '-o', String(user.uid), '-g', String(user.gid), '-m', '0700', dir])
  chownSync(dir, user.uid, user.gid)
  return dir
}

import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process'
import type { Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { findOnPath } from '../process/find-executable.js'
import { wslExecArgs, wslProcessEnv, type WslTarget } from '../process/wsl-group.js'

/**
 * Who git runs as: the run's agent user, never the service, since a repository is hostile input and whatever it
 * still manages to make git do must be no more than its agent could do. `groups`, when given, are set with setpriv
 * (Node's own uid/gid options leave a process no supplementary group, and a repository is often shared through one).
 */
export interface GitIdentity {
  uid: number
  gid: number
  groups?: readonly number[]
}

/**
 * Inside a WSL distro (a Windows host's run with `wsl_distro`): git, and every file of its worktrees, are the distro's,
 * reached through wsl.exe as the distro user the run asked for (its default user when none), its agent's user too.
 */
export type WslUser = Pick<WslTarget, 'wslBin' | 'distro' | 'user'>

/** Who git runs as, and where: a uid of this host (undefined: the service's own), or a distro's user. */
export type GitUser = GitIdentity | WslUser | undefined

export const isWslUser = (user: GitUser): user is WslUser => user !== undefined && 'distro' in user

/** The distro's PATH: the Windows host's own means nothing inside it. */
const DISTRO_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
/** What `env` answers when the program it is asked to run is not there: git is not installed in the distro. */
const ENV_NOT_FOUND = 127

/** git is not on the service's PATH (503 GIT_NOT_INSTALLED). */
export class GitNotInstalled extends Error {
  readonly code = 'GIT_NOT_INSTALLED'
  constructor() {
    super('git is not installed (not found on PATH)')
    this.name = 'GitNotInstalled'
  }
}

/** A git command ended otherwise than asked: its exit status, or its time or output bound crossed. */
export class GitFailed extends Error {
  constructor(
    readonly command: string,
    readonly exitCode: number | null,
    readonly stderr: string,
    readonly reason: 'exit' | 'timeout' | 'output' = 'exit'
  ) {
    super(`git ${command}: ${reason === 'exit' ? `exit ${String(exitCode)}` : `${reason} bound crossed`}` +
      (stderr === '' ? '' : `: ${stderr.trim()}`))
    this.name = 'GitFailed'
  }
}

/**
 * Set on every call, above whatever the repository's own config (local, worktree, included) says: command-line config
 * comes last. Each turns off a program or a behaviour a planted config could otherwise start or change.
 */
export const HARDENING: ReadonlyArray<readonly [string, string]> = [
  // hooks: post-checkout (worktree add), reference-transaction (update-ref), pre-auto-gc…; /dev/null/<hook> is none
  ['core.hooksPath', '/dev/null'],
  // a program run to list changed files, by every command that refreshes an index (add, diff, worktree add)
  ['core.fsmonitor', 'false'],
  ['core.untrackedCache', 'false'],
  // the per-user attributes file (the repository's own .gitattributes cannot be turned off: see filterOverrides)
  ['core.attributesFile', '/dev/null'],
  ['diff.external', ''],
  // network, should anything reach for it (a partial clone's lazy fetch): GIT_ALLOW_PROTOCOL also overrides a
  // repository's own protocol.<name>.allow, which outranks protocol.allow
  ['protocol.allow', 'never'],
  ['core.sshCommand', 'false'],
  ['core.askPass', ''],
  ['credential.helper', ''],
  // a bare repository found by discovery (one committed inside a tree) is not a repository here
  ['safe.bareRepository', 'explicit'],
  ['submodule.recurse', 'false'],
  ['commit.gpgSign', 'false'],
  ['gpg.program', 'false'],
  ['gpg.ssh.program', 'false'],
  ['gpg.x509.program', 'false'],
  // an automatic gc or maintenance would run as the agent user in the caller's repository, long after the call
  ['gc.auto', '0'],
  ['maintenance.auto', 'false'],
  // a sparse checkout would leave files out of the worktree, which a changeset would then count as deleted
  ['core.sparseCheckout', 'false'],
  ['index.sparse', 'false'],
  // a line-ending check that makes `add` fail instead of converting
  ['core.safecrlf', 'false'],
  ['core.quotePath', 'false'],
  ['color.ui', 'false']
]

/** What no call inherits from the service: its own config, prompts, pagers, editors, network, replacements. */
const BASE_ENV: Readonly<Record<string, string>> = {
  LC_ALL: 'C',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  // ~/.config/git/{config,attributes,ignore}: the identity's HOME may be one its agent wrote to
  XDG_CONFIG_HOME: '/dev/null',
  GIT_ATTR_NOSYSTEM: '1',
  GIT_TERMINAL_PROMPT: '0',
  GIT_PAGER: 'cat',
  PAGER: 'cat',
  // `:` is git's own word for "no editor"
  GIT_EDITOR: ':',
  GIT_SEQUENCE_EDITOR: ':',
  // set, even empty, it allows only the protocols it lists, whatever protocol.<name>.allow says
  GIT_ALLOW_PROTOCOL: '',
  GIT_PROTOCOL_FROM_USER: '0',
  GIT_NO_LAZY_FETCH: '1',
  GIT_NO_REPLACE_OBJECTS: '1',
  GIT_OPTIONAL_LOCKS: '0'
}

export interface GitCall {
  /** Where git runs (`-C`): a repository, or a directory inside one. */
  cwd: string
  identity?: GitUser
  /** HOME for the call: a directory the identity owns; `cwd` when not given. */
  home?: string
  /** Directories git may use though another user owns them (safe.directory, read from the command line only). */
  safe: readonly string[]
  /** Variables this call needs (GIT_DIR, GIT_INDEX_FILE, the author): set after the base, never from the service. */
  env?: Readonly<Record<string, string>>
  /** Config of any key and value (a filter's name may hold `=`), passed through GIT_CONFIG_COUNT. */
  config?: ReadonlyArray<readonly [string, string]>
  input?: string
  timeoutMs?: number
  /** What is read of stdout when `output` is not given; beyond it, the call fails. */
  maxOutputBytes?: number
  /** Where stdout goes, at its pace, when it is not to be kept in memory. */
  output?: Writable
  /** Exit statuses that are answers, not failures (`git config --get-regexp` says 1 for nothing found). */
  okExitCodes?: readonly number[]
}

export interface GitResult {
  stdout: Buffer
  exitCode: number
}

const DEFAULT_TIMEOUT_MS = 120_000
const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024
const STDERR_KEPT_BYTES = 8 * 1024

/** The `-c` options and the environment of one call. */
export function gitInvocation(args: readonly string[], call: GitCall, path: string):
{ args: string[]; env: Record<string, string> } {
  const config = [...HARDENING, ...call.safe.map((dir) => ['safe.directory', dir] as const)]
  const extra = call.config ?? []
  const env: Record<string, string> = { ...BASE_ENV, PATH: path, HOME: call.home ?? call.cwd, ...call.env }
  env['GIT_CONFIG_COUNT'] = String(extra.length)
  extra.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key
    env[`GIT_CONFIG_VALUE_${i}`] = value
  })
  return {
    args: ['--no-pager', ...config.flatMap(([key, value]) => ['-c', `${key}=${value}`]), '-C', call.cwd, ...args],
    env
  }
}

async function executable(name: string, path: string): Promise<string> {
  const found = await findOnPath(name, path, '/')
  if (found === undefined) {
    if (name === 'git') throw new GitNotInstalled()
    throw new Error(`${name} is not on PATH: git cannot be run with the agent user's groups`)
  }
  return found
}

/** How one call is started, and how it is ended early. */
interface Launch {
  file: string
  args: string[]
  options: SpawnOptions
  kill: (child: ChildProcess) => void
}

/** Ends the whole group git started (its own, `detached`): a hook or helper it ran too, were any still to run. */
const killGroup = (child: ChildProcess): void => {
  try {
    process.kill(-child.pid!, 'SIGKILL')
  } catch {
    // already gone
  }
}

/**
 * On this host, as the identity: setpriv when it has groups, spawn's uid/gid otherwise; from `/`, not cwd (a
 * directory the identity cannot enter would be reported as a missing program).
 */
async function hostLaunch(gitArgs: string[], env: Record<string, string>, identity: GitIdentity | undefined):
Promise<Launch> {
  const path = env['PATH']!
  const git = await executable('git', path)
  const options: SpawnOptions = { cwd: '/', env, detached: true }
  if (identity?.groups === undefined || identity.groups.length === 0) {
    const as = identity === undefined ? {} : { uid: identity.uid, gid: identity.gid }
    return { file: git, args: gitArgs, options: { ...options, ...as }, kill: killGroup }
  }
  const setpriv = await executable('setpriv', path)
  return {
    file: setpriv,
    args: [`--reuid=${identity.uid}`, `--regid=${identity.gid}`, `--groups=${identity.groups.join(',')}`, '--',
      git, ...gitArgs],
    options,
    kill: killGroup
  }
}

/**
 * Inside the distro, through wsl.exe: the environment made from scratch there by `env -i` (only what WSLENV names
 * would cross otherwise), every value an argument after --exec, which wsl.exe splits as Node quotes. Windows ends only
 * wsl.exe: a git still running inside ends on its own (its stdin closed).
 */
function wslLaunch(gitArgs: string[], env: Record<string, string>, wsl: WslUser): Launch {
  const assignments = Object.entries({ ...env, PATH: DISTRO_PATH }).map(([name, value]) => `${name}=${value}`)
  return {
    file: wsl.wslBin,
    args: wslExecArgs(wsl, '/', ['env', '-i', ...assignments, 'git', ...gitArgs]),
    options: { env: wslProcessEnv(process.env), windowsHide: true },
    kill: (child) => child.kill('SIGKILL')
  }
}

/**
 * Runs git without a shell, as the call's identity, with an environment made from scratch and the hardening above;
 * its own process group, killed whole at the timeout; stdout bounded or streamed.
 */
export async function git(args: readonly string[], call: GitCall): Promise<GitResult> {
  const path = process.env['PATH'] ?? '/usr/local/bin:/usr/bin:/bin'
  const invocation = gitInvocation(args, call, path)
  const launch = isWslUser(call.identity)
    ? wslLaunch(invocation.args, invocation.env, call.identity)
    : await hostLaunch(invocation.args, invocation.env, call.identity)
  const child = spawn(launch.file, launch.args, { ...launch.options, stdio: ['pipe', 'pipe', 'pipe'] })
  const name = args.find((arg) => !arg.startsWith('-')) ?? 'git'
  const ended: { reason: 'exit' | 'timeout' | 'output' } = { reason: 'exit' }
  const kill = (why?: 'timeout' | 'output'): void => {
    if (why !== undefined) ended.reason = why
    launch.kill(child)
  }
  const timer = setTimeout(() => { kill('timeout') }, call.timeoutMs ?? DEFAULT_TIMEOUT_MS)
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    if (stderr.length < STDERR_KEPT_BYTES) stderr += chunk.slice(0, STDERR_KEPT_BYTES - stderr.length)
  })
  child.stdin.on('error', () => undefined).end(call.input ?? '')
  const chunks: Buffer[] = []
  let read = 0
  const max = call.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES
  const reading = call.output === undefined
    ? new Promise<void>((resolve) => {
      child.stdout.on('data', (chunk: Buffer) => {
        read += chunk.length
        if (read > max) kill('output')
        else chunks.push(chunk)
      })
      child.stdout.on('close', resolve)
    })
    : pipeline(child.stdout, call.output)
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code) => { resolve(code) })
  })
  try {
    const [exitCode] = await Promise.all([exited, reading])
    if (exitCode === ENV_NOT_FOUND && isWslUser(call.identity)) throw new GitNotInstalled()
    if (ended.reason !== 'exit' || exitCode === null || !(call.okExitCodes ?? [0]).includes(exitCode)) {
      throw new GitFailed(name, exitCode, stderr, ended.reason)
    }
    return { stdout: Buffer.concat(chunks), exitCode }
  } catch (error) {
    kill()
    if (error instanceof GitFailed || error instanceof GitNotInstalled) throw error
    throw new GitFailed(name, null, `${stderr}${(error as Error).message}`, ended.reason)
  } finally {
    clearTimeout(timer)
  }
}

/** stdout as text, its last newline dropped. */
export const text = (result: GitResult): string => result.stdout.toString('utf8').replace(/\n$/, '')

/** The drivers `filter.<name>.<key>` config keys name (NUL-separated, as `git config -z --name-only` lists them). */
export function filterDrivers(names: string): string[] {
  const drivers = new Set<string>()
  for (const name of names.split('\0')) {
    const match = /^filter\.(.+)\.[^.]+$/s.exec(name)
    if (match !== null) drivers.add(match[1]!)
  }
  return [...drivers]
}

/** Every driver made a no-op: no clean, smudge or process program, and none required. */
export const neutralFilters = (drivers: readonly string[]): Array<readonly [string, string]> =>
  drivers.flatMap((driver) => [
    [`filter.${driver}.clean`, ''],
    [`filter.${driver}.smudge`, ''],
    [`filter.${driver}.process`, ''],
    [`filter.${driver}.required`, 'false']
  ] as const)

/**
 * A `.gitattributes` in the tree names filters that the repository's config (or a file it includes) defines as
 * programs, run on every checkout and add; git has no switch for attributes from the tree (2.39 has no attr source),
 * so every driver the config defines, as git reads it for this call, is overridden by name.
 */
export async function filterOverrides(call: GitCall): Promise<Array<readonly [string, string]>> {
  const listed = await git(['config', '-z', '--name-only', '--get-regexp', '^filter\\.'], {
    ...call, okExitCodes: [0, 1], maxOutputBytes: 4 * 1024 * 1024
  })
  return neutralFilters(filterDrivers(listed.stdout.toString('utf8')))
}

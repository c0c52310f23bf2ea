import { randomUUID } from 'node:crypto'
import { chmodSync, constants, lstatSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { chmod, chown, lstat, mkdir, open, readdir, readFile, realpath, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import type { FileBind } from '../process/containment.js'

/**
 * The `sudo` an agent finds first on its PATH: the real sudo (named by the service), never allowed to ask anyone for a
 * password. `-A` makes sudo call the askpass helper beside this script exactly when it needs a password, whatever the
 * sudoers rules, the command or the options; `-n` from the agent still wins. Fixed text: nothing from a request.
 */
const SUDO_SCRIPT = `#!/bin/sh
# agent-runner: sudo without a password prompt; see ../askpass.
[ -n "$AGENT_RUNNER_SUDO" ] || { echo "sudo: command not found" >&2; exit 127; }
# -S (a password on standard input) cannot be combined with -A: such a call goes to sudo as it is.
for arg do
  case $arg in
    -S | --stdin) exec "$AGENT_RUNNER_SUDO" "$@" ;;
    -- | [!-]*) break ;;
  esac
done
SUDO_ASKPASS="\${0%/*}/../askpass" exec "$AGENT_RUNNER_SUDO" -A "$@"
`

/**
 * sudo calls this (the askpass beside bin/) when it needs a password. It tells the service through the run's own
 * report file (a side channel the agent's output never goes through, so it holds whatever the CLI prints), tells the
 * agent why in a line its model can relay, and gives no password: sudo then fails at once.
 */
const ASKPASS_SCRIPT = `#!/bin/sh
user=$(id -un 2>/dev/null) || user=$USER
[ -z "$AGENT_RUNNER_SUDO_REPORT" ] || echo "password_required $user" >> "$AGENT_RUNNER_SUDO_REPORT" 2>/dev/null
echo "agent-runner: sudo needs a password for user $user here, and agent-runner never gives one, so the command \
did not run. Tell the user: allow it without a password (a NOPASSWD rule in /etc/sudoers.d/), or do the task \
without sudo." >&2
exit 1
`

const shellQuoted = (line: string): string => `'${line.replaceAll("'", "'\\''")}'`

/**
 * The same sudo for a run whose mount namespace shows it at the real sudo's own path, so that `/usr/bin/sudo … 2>&-`
 * meets it too: the real one is reachable there only at `relay` (bound there, set-user-ID kept), and nothing comes
 * from the environment, which an agent may have cleared. sudoedit is a link to sudo: it stays sudoedit (`-e`).
 */
function boundSudoScript(relay: string, askpass: string): string {
  return `#!/bin/sh
# agent-runner: sudo without a password prompt, at sudo's own path in this run; see ${askpass}.
case \${0##*/} in sudoedit) set -- -e "$@" ;; esac
for arg do
  case $arg in
    -S | --stdin) exec ${shellQuoted(relay)} "$@" ;;
    -- | [!-]*) break ;;
  esac
done
SUDO_ASKPASS=${shellQuoted(askpass)} exec ${shellQuoted(relay)} -A "$@"
`
}

/** What a run's report says: whether sudo asked for a password, and for whom. */
export interface SudoAsked {
  passwordNeeded: boolean
  /** The account sudo asked about, as the askpass saw it: inside WSL, the distro's default user has no other name. */
  user?: string
}

/** One run's view of the shim: what the agent's environment gains, and whether sudo asked it for a password. */
export interface SudoWatch {
  env: NodeJS.ProcessEnv
  /** For a run with a mount namespace of its own: the shim in place of the real sudo, which moves to the relay. */
  binds?: FileBind[]
  /** Ends the watch (the report is removed). */
  end: () => Promise<SudoAsked>
}

/** The agent writes its own report: only a name sudo could have asked about is taken from it. */
const USER_NAME = /^[a-zA-Z0-9._-]+$/

export function readSudoReport(text: string): SudoAsked {
  const line = text.split('\n').find((entry) => entry.startsWith('password_required'))
  if (line === undefined) return { passwordNeeded: false }
  const user = line.slice('password_required'.length).trim()
  return USER_NAME.test(user) ? { passwordNeeded: true, user } : { passwordNeeded: true }
}

export const NOTHING_ASKED: SudoWatch['end'] = async () => ({ passwordNeeded: false })

const writing = (script: string, file: string): string =>
  `printf '%s\\n' ${script.trimEnd().split('\n').map(shellQuoted).join(' ')} > "${file}"`

/**
 * Inside a WSL distro, the same shim, set up by the run's fixed start script before it becomes the agent (the run id
 * as $1): in a directory of the run's own that mkdir creates or the shim is left out (never one somebody else made),
 * readable by the distro user alone. One line: it crosses wsl.exe's command line.
 */
export const WSL_SUDO_PRELUDE =
  'if s=$(command -v sudo) && d="/tmp/agent-runner-$1.sudo" && mkdir -m 700 "$d" "$d/bin" 2>/dev/null; then ' +
  `${writing(SUDO_SCRIPT, '$d/bin/sudo')} && ${writing(ASKPASS_SCRIPT, '$d/askpass')} && ` +
  'chmod 700 "$d/bin/sudo" "$d/askpass" && ' +
  'export PATH="$d/bin:$PATH" AGENT_RUNNER_SUDO="$s" AGENT_RUNNER_SUDO_REPORT="$d/report"; fi; '

/** A report is a line or two: whatever else an agent put there is never read whole. */
export const SUDO_REPORT_MAX_BYTES = 4096

/**
 * After a WSL run: its report (a plain file, never a link or a FIFO, its first 4 KiB), then the run's shim directory
 * removed (only one the distro user owns).
 */
export const WSL_SUDO_REPORT_SCRIPT =
  'd="/tmp/agent-runner-$1.sudo"; [ -O "$d" ] || exit 0; ' +
  `[ -f "$d/report" ] && [ ! -h "$d/report" ] && head -c ${String(SUDO_REPORT_MAX_BYTES)} "$d/report"; rm -rf "$d"`

/**
 * The report as the agent left it, read so that nothing it could put in its place holds the service: a link is not
 * followed (a link to /dev/zero), a FIFO or a device is not read (a FIFO would block one of libuv's four threads, and
 * every file access of every run behind it), and a file only up to SUDO_REPORT_MAX_BYTES (400 MB would be in memory).
 */
export async function readReportFile(path: string): Promise<string> {
  let handle
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch {
    return ''
  }
  try {
    if (!(await handle.stat()).isFile()) return ''
    const buffer = Buffer.alloc(SUDO_REPORT_MAX_BYTES)
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0)
    return buffer.toString('utf8', 0, bytesRead)
  } catch {
    return ''
  } finally {
    await handle.close().catch(() => undefined)
  }
}

/**
 * The service's sudo shim, written once at start into a directory of its own (the service's, read-only to agents).
 * Each run gets a report file under a directory agents may cross but not list, named at random: an agent can write
 * its own run's report, never find another's.
 */
export class SudoShim {
  readonly #bin: string
  readonly #reports: string
  /** Where a run's mount namespace binds the real sudo: an empty file outside any run (a mount needs one). */
  readonly #relay: string
  readonly #boundSudo: string
  /** How the kernel stamped the shim when it was last known whole: undefined until then. */
  #wholeStamp: string | undefined

  private constructor(readonly dir: string) {
    this.#bin = join(dir, 'bin')
    this.#reports = join(dir, 'reports')
    this.#relay = join(dir, 'real-sudo')
    this.#boundSudo = join(dir, 'bound-sudo')
  }

  /** The scripts as installed: restored before each run to exactly this. */
  #scripts(): Array<[string, string]> {
    return [
      [join(this.#bin, 'sudo'), SUDO_SCRIPT],
      [join(this.dir, 'askpass'), ASKPASS_SCRIPT],
      [this.#boundSudo, boundSudoScript(this.#relay, join(this.dir, 'askpass'))],
      [this.#relay, '']
    ]
  }

  static install(parent = tmpdir()): SudoShim {
    const shim = new SudoShim(mkdtempSync(join(parent, 'agent-runner-sudo-')))
    mkdirSync(shim.#bin)
    mkdirSync(shim.#reports)
    for (const [path, script] of shim.#scripts()) writeFileSync(path, script)
    for (const [path, mode] of shim.#modes()) chmodSync(path, mode)
    return shim
  }

  /** Exact modes whatever the umask: agents (another user) run the scripts and cross the directories. */
  #modes(): Array<[string, number]> {
    return [
      [this.dir, 0o711], [this.#bin, 0o755], [this.#reports, 0o711],
      [join(this.#bin, 'sudo'), 0o755], [join(this.dir, 'askpass'), 0o755], [this.#boundSudo, 0o755],
      [this.#relay, 0o755]
    ]
  }

  /**
   * Puts the shim back as installed, before a run relies on it: where agents run as the service's own user (no
   * AGENT_USER), an earlier run could have changed it, or planted a `bin/claude` that every later agent's PATH finds
   * first. Returns what it found changed; nothing where agents cannot write here (another user's, root's).
   */
  async restore(): Promise<string[]> {
    // Read synchronously: a few cached inodes cost microseconds, against about a millisecond of file reads a run.
    if (this.#wholeStamp !== undefined && this.#wholeStamp === this.#stamp()) return []
    const changed = await this.#putBack()
    this.#wholeStamp = this.#stamp()
    return changed
  }

  /**
   * Each path's inode, mode and change time: whatever writes a file, adds one to a directory, renames, links or
   * chmods moves one of them, and no user can set a change time back. The reports directory changes with every run's
   * report file: its inode and mode alone say it is still the one made here (its files are not the shim).
   */
  #stamp(): string {
    const stampOf = (path: string, withChange: boolean): string => {
      try {
        const found = lstatSync(path, { bigint: true })
        return `${found.ino}:${found.mode}:${withChange ? found.ctimeNs : ''}`
      } catch {
        return 'missing'
      }
    }
    return [
      stampOf(this.dir, true), stampOf(this.#bin, true), stampOf(this.#reports, false),
      ...this.#scripts().map(([path]) => stampOf(path, true))
    ].join(' ')
  }

  async #putBack(): Promise<string[]> {
    const changed: string[] = []
    for (const dir of [this.#bin, this.#reports]) {
      if (await lstat(dir).then((stat) => stat.isDirectory(), () => false)) continue
      changed.push(dir)
      await rm(dir, { recursive: true, force: true })
      await mkdir(dir)
    }
    for (const entry of await readdir(this.#bin)) {
      if (entry === 'sudo') continue
      changed.push(join(this.#bin, entry))
      await rm(join(this.#bin, entry), { recursive: true, force: true })
    }
    for (const [path, script] of this.#scripts()) {
      const kept = await lstat(path).then((stat) => stat.isFile(), () => false) &&
        await readFile(path, 'utf8').then((text) => text === script, () => false)
      if (kept) continue
      changed.push(path)
      await rm(path, { recursive: true, force: true })
      await writeFile(path, script)
    }
    for (const [path, mode] of this.#modes()) {
      if (((await lstat(path)).mode & 0o7777) !== mode) await chmod(path, mode)
    }
    return changed
  }

  /**
   * Prepares one run: its report file (owned by the agent's user, so that user alone can write it) and the variables
   * that put the shim first on the agent's PATH. `realSudo` undefined: there is no sudo to stand in for. `atItsPath`:
   * the run has a mount namespace of its own that binds files, where the shim also takes the real sudo's place.
   */
  async watch(
    env: NodeJS.ProcessEnv,
    realSudo: string | undefined,
    user?: { uid: number; gid: number },
    atItsPath = false
  ): Promise<SudoWatch> {
    if (realSudo === undefined) return { env, end: NOTHING_ASKED }
    const report = join(this.#reports, randomUUID())
    await writeFile(report, '', { mode: 0o600 })
    if (user !== undefined) await chown(report, user.uid, user.gid)
    const path = env['PATH'] ?? ''
    // The real file, not a link to it (/bin/sudo on a merged /usr): a bind lands on what the link names.
    const realPath = atItsPath ? await realpath(realSudo) : realSudo
    return {
      env: {
        ...env,
        PATH: path === '' ? this.#bin : `${this.#bin}${delimiter}${path}`,
        AGENT_RUNNER_SUDO: atItsPath ? this.#relay : realSudo,
        AGENT_RUNNER_SUDO_REPORT: report
      },
      ...(atItsPath
        ? { binds: [{ source: realPath, target: this.#relay }, { source: this.#boundSudo, target: realPath }] }
        : {}),
      end: async () => {
        const text = await readReportFile(report)
        // Also called when nobody waits for it any more (a run its client abandoned): it never rejects.
        await rm(report, { force: true }).catch(() => undefined)
        return readSudoReport(text)
      }
    }
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true })
  }
}

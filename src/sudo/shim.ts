import { randomUUID } from 'node:crypto'
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { chown, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'

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

/** What a run's report says: whether sudo asked for a password, and for whom. */
export interface SudoAsked {
  passwordNeeded: boolean
  /** The account sudo asked about, as the askpass saw it: inside WSL, the distro's default user has no other name. */
  user?: string
}

/** One run's view of the shim: what the agent's environment gains, and whether sudo asked it for a password. */
export interface SudoWatch {
  env: NodeJS.ProcessEnv
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

const shellQuoted = (line: string): string => `'${line.replaceAll("'", "'\\''")}'`
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

/** After a WSL run: its report, then the run's shim directory removed (only one the distro user owns). */
export const WSL_SUDO_REPORT_SCRIPT =
  'd="/tmp/agent-runner-$1.sudo"; [ -O "$d" ] || exit 0; cat "$d/report" 2>/dev/null; rm -rf "$d"'

/**
 * The service's sudo shim, written once at start into a directory of its own (the service's, read-only to agents).
 * Each run gets a report file under a directory agents may cross but not list, named at random: an agent can write
 * its own run's report, never find another's.
 */
export class SudoShim {
  readonly #bin: string
  readonly #reports: string

  private constructor(readonly dir: string) {
    this.#bin = join(dir, 'bin')
    this.#reports = join(dir, 'reports')
  }

  static install(parent = tmpdir()): SudoShim {
    const shim = new SudoShim(mkdtempSync(join(parent, 'agent-runner-sudo-')))
    mkdirSync(shim.#bin)
    mkdirSync(shim.#reports)
    writeFileSync(join(shim.#bin, 'sudo'), SUDO_SCRIPT)
    writeFileSync(join(shim.dir, 'askpass'), ASKPASS_SCRIPT)
    // Exact modes whatever the umask: agents (another user) run the scripts and cross the directories.
    const modes: [string, number][] = [
      [shim.dir, 0o711], [shim.#bin, 0o755], [shim.#reports, 0o711],
      [join(shim.#bin, 'sudo'), 0o755], [join(shim.dir, 'askpass'), 0o755]
    ]
    for (const [path, mode] of modes) chmodSync(path, mode)
    return shim
  }

  /**
   * Prepares one run: its report file (owned by the agent's user, so that user alone can write it) and the variables
   * that put the shim first on the agent's PATH. `realSudo` undefined: there is no sudo to stand in for.
   */
  async watch(
    env: NodeJS.ProcessEnv,
    realSudo: string | undefined,
    user?: { uid: number; gid: number }
  ): Promise<SudoWatch> {
    if (realSudo === undefined) return { env, end: NOTHING_ASKED }
    const report = join(this.#reports, randomUUID())
    await writeFile(report, '', { mode: 0o600 })
    if (user !== undefined) await chown(report, user.uid, user.gid)
    const path = env['PATH'] ?? ''
    return {
      env: {
        ...env,
        PATH: path === '' ? this.#bin : `${this.#bin}${delimiter}${path}`,
        AGENT_RUNNER_SUDO: realSudo,
        AGENT_RUNNER_SUDO_REPORT: report
      },
      end: async () => {
        const text = await readFile(report, 'utf8').catch(() => '')
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

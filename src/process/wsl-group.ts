import { spawn, type ChildProcess } from 'node:child_process'
import type { Containment, ContainedRun, LeftoverRecord, StopSignal } from './containment.js'

/** Where a WSL run goes, as wsl.exe names it. */
export interface WslTarget {
  wslBin: string
  distro: string
  user: string | undefined
  /** The directory inside the distro, for `--cd`. */
  cwd: string | undefined
}

/**
 * Inside the distro: the caller's fixed prelude (its sudo shim), then record the pid of a new session (setsid made it
 * the leader of its own process group) and its start time in a directory of the run's own, made private by the run
 * itself (a directory someone else made first fails the run rather than steer its stops), then become the agent.
 * Fixed text: the run id and the agent's argv arrive as positional parameters, so nothing from a request is ever read
 * by a shell.
 */
const startScript = (prelude: string): string =>
  `${prelude}d="/tmp/agent-runner-$1.run"; mkdir -m 700 "$d" || exit 125; ` +
  'echo "$$ $(cut -d" " -f22 /proc/$$/stat)" > "$d/pid" && shift && exec "$@"'

/**
 * Signals the group recorded for a run id. A stop may come before the start script wrote the file: wait for it up to
 * $3 tenths of a second. Acted on only when the directory is the run user's own, the pid a plain number above 1, and
 * the process under it (while there is one) the one that started then. SIGKILL is the last word: the record goes.
 */
const SIGNAL_SCRIPT = [
  'd="/tmp/agent-runner-$1.run"; f="$d/pid"; i=0',
  'while [ ! -s "$f" ] && [ "$i" -lt "$3" ]; do sleep 0.1; i=$((i + 1)); done',
  '[ -O "$d" ] && [ -s "$f" ] || exit 0',
  'read -r p t < "$f"',
  'case "$p" in ""|*[!0-9]*|0|1) exit 0;; esac',
  's=$(cut -d" " -f22 "/proc/$p/stat" 2>/dev/null)',
  '[ -z "$s" ] || [ "$s" = "$t" ] && kill -s "$2" -- "-$p" 2>/dev/null',
  '[ "$2" != KILL ] || rm -rf "$d"'
].join('\n')

/** How long a stop waits for a run that has just started to record itself, in tenths of a second. */
const START_WAIT_TENTHS = 50
/** A wsl.exe round trip that hangs (a distro shutting down) must not hold the run forever. */
const SIGNAL_CALL_TIMEOUT_MS = 30_000
/** What a fixed script's answer may hold: a line or two, never an agent's output. */
const SCRIPT_OUTPUT_BYTES = 4096

function distroArgs(distro: string, user: string | undefined): string[] {
  return ['-d', distro, ...(user === undefined ? [] : ['-u', user])]
}

/**
 * wsl.exe's arguments for a program run directly (no shell) in `cwd` inside the distro. `--exec`, never `--`: after
 * `--` wsl.exe hands the rest of its command line to the distro's shell.
 */
export function wslExecArgs(
  target: Pick<WslTarget, 'distro' | 'user'>,
  cwd: string,
  argv: readonly string[]
): string[] {
  return [...distroArgs(target.distro, target.user), '--cd', cwd, '--exec', ...argv]
}

/** wsl.exe's own messages in UTF-8 rather than UTF-16LE (WSL_UTF8 stays on the Windows side unless WSLENV names it). */
export function wslProcessEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...env, WSL_UTF8: '1' }
}

/** Runs the signal script through a second wsl.exe; resolves when it has answered (or could not start). */
export function signalWslRun(
  target: Pick<WslTarget, 'wslBin' | 'distro' | 'user'>,
  runId: string,
  signal: StopSignal,
  env: NodeJS.ProcessEnv,
  waitTenths = START_WAIT_TENTHS
): Promise<void> {
  const args = [
    ...distroArgs(target.distro, target.user),
    '--exec', 'sh', '-c', SIGNAL_SCRIPT, 'agent-runner', runId, signal.slice(3), String(waitTenths)
  ]
  return new Promise((resolve) => {
    const call = spawn(target.wslBin, args, {
      env: wslProcessEnv(env), stdio: 'ignore', windowsHide: true, timeout: SIGNAL_CALL_TIMEOUT_MS
    })
    call.once('error', () => resolve())
    call.once('exit', () => resolve())
  })
}

/**
 * Runs a fixed script inside the distro, the run id as $1, through a second wsl.exe; resolves with the start of what
 * it printed ('' when wsl could not run it).
 */
export function wslScriptOutput(
  target: Pick<WslTarget, 'wslBin' | 'distro' | 'user'>,
  runId: string,
  script: string,
  env: NodeJS.ProcessEnv
): Promise<string> {
  const args = [...distroArgs(target.distro, target.user), '--exec', 'sh', '-c', script, 'agent-runner', runId]
  return new Promise((resolve) => {
    const call = spawn(target.wslBin, args, {
      env: wslProcessEnv(env), stdio: ['ignore', 'pipe', 'ignore'], windowsHide: true, timeout: SIGNAL_CALL_TIMEOUT_MS
    })
    let printed = Buffer.alloc(0)
    call.stdout.on('data', (chunk: Buffer) => {
      if (printed.length >= SCRIPT_OUTPUT_BYTES) return
      printed = Buffer.concat([printed, chunk]).subarray(0, SCRIPT_OUTPUT_BYTES)
    })
    call.once('error', () => { resolve('') })
    call.once('close', () => { resolve(printed.toString('utf8')) })
  })
}

/**
 * The wsl.exe call that runs the agent's argv inside the distro as the leader of a process group recorded under the
 * run id. `--exec`, never `--`: after `--` wsl.exe hands the rest of its command line to the distro's shell.
 */
export function wslCommand(
  target: WslTarget,
  runId: string,
  file: string,
  args: string[],
  prelude = ''
): { file: string; args: string[] } {
  return {
    file: target.wslBin,
    args: [
      ...distroArgs(target.distro, target.user),
      ...(target.cwd === undefined ? [] : ['--cd', target.cwd]),
      '--exec', 'setsid', '-w', 'sh', '-c', startScript(prelude), 'agent-runner', runId, file, ...args
    ]
  }
}

/**
 * A WSL run: the Linux process lives under the distro's init, not under wsl.exe, so ending wsl.exe (all that Windows
 * can do to a child) leaves it running (microsoft/WSL#2496). Every stop is therefore a second wsl.exe call that
 * signals the agent's process group inside the distro; wsl.exe itself ends when its Linux process does, and is
 * terminated only after SIGKILL was sent inside.
 */
export function wslProcessGroup(target: WslTarget, runId: string, env: NodeJS.ProcessEnv): Containment {
  return {
    mode: 'wsl-process-group',
    // The argv is already the wsl.exe call (wslCommand); on the Windows side there is nothing to wrap.
    launch: async (file, args) => ({ file, args, detached: false }),
    control: (child: ChildProcess): ContainedRun => {
      const leftover: LeftoverRecord = { kind: 'wsl-group', distro: target.distro, user: target.user, runId }
      const killWsl = (): void => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      }
      return {
        leftover,
        async signal(signal) {
          await signalWslRun(target, runId, signal, env)
          if (signal === 'SIGKILL') killWsl()
        },
        async sweep() {
          await signalWslRun(target, runId, 'SIGKILL', env, 0)
          killWsl()
        },
        // wsl.exe passes the Linux exit status on, and a death by signal N as N: nothing tells the two apart.
        exit: (exitCode, signal) => ({ exitCode, signal })
      }
    }
  }
}

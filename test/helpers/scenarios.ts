// The tasks the stand-in agents act out (test/fixtures/agents/scenarios.mjs, shared by every stand-in): a task
// `@name arg…`, split on spaces. Any other task is echoed back with the argv and directory the stand-in received.
// One function per scenario, so that a test names what it wants and the arguments are checked here, not misread there.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Test } from 'tap'
import { tempDir } from './app.js'

/** Arguments are split on single spaces by the stand-in: one holding a space would arrive as two. */
function task(name: string, ...args: Array<string | number>): string {
  for (const arg of args) {
    const text = String(arg)
    if (text === '' || /\s/.test(text)) {
      throw new Error(`@${name}: the stand-in cannot receive ${JSON.stringify(text)} as one argument`)
    }
  }
  return [`@${name}`, ...args].join(' ')
}

export const scenario = {
  /** Sleeps `ms`, then answers `slept <ms>`; `markers` only show in its argv (to find its process). */
  sleep: (ms: number, ...markers: string[]) => task('sleep', ms, ...markers),
  /** Fails the way its CLI does (crush: `ERROR something failed`, exit 1). */
  fail: () => task('fail'),
  /** Writes `bytes` of `x` to stdout, 64 KiB at a time, waiting for the pipe like any writer. */
  flood: (bytes: number) => task('flood', bytes),
  /** Answers `chars` characters, starting `ANSWER-HEAD-` and ending `-ANSWER-TAIL`. */
  longAnswer: (chars: number) => task('long-answer', chars),
  /**
   * Like `flood`, and after each write the kernel has taken, records how many bytes it has written so far in
   * `countFile`: what the agent managed to write, whoever reads (or fails to read) its output.
   */
  floodCounted: (countFile: string, bytes: number) => task('flood-counted', countFile, bytes),
  /** Bytes that are not UTF-8: `a ff fe c3 ( b`. */
  invalidUtf8: () => task('invalid-utf8'),
  /**
   * Starts a grandchild ignoring every catchable signal and writes its pid to `pidFile`; `stubborn`: the agent ignores
   * SIGINT and SIGTERM too, and records each one it ignores in `<pidFile>.signals`. `markers` show in the grandchild's
   * argv, so a test can find it in /proc whatever PID namespace it ran in.
   */
  grandchild: (pidFile: string, options: { stubborn?: boolean; markers?: string[] } = {}) =>
    task('grandchild', pidFile, options.stubborn === true ? 'stubborn' : 'yielding', ...(options.markers ?? [])),
  /** A daemon in its own session and a double-forked grandchild, each marking `dir` once running; then lives `ms`. */
  daemons: (dir: string, ms: number) => task('daemons', dir, ms),
  /** A daemon in its own session that clears its environment, marking `dir` once running; then lives `ms`. */
  scrubbed: (dir: string, ms: number) => task('scrubbed', dir, ms),
  /** A child in its own session holding the agent's stdout; its pid in `pidFile`; the agent exits at once. */
  escape: (pidFile: string, marker: string) => task('escape', pidFile, marker),
  /** `tick 1`…`tick <count>`, `ms` apart; its own pid in `pidFile` first, when given. */
  drip: (
    count: number, ms: number, pidFile?: string
  ) => (pidFile === undefined ? task('drip', count, ms) : task('drip', count, ms, pidFile)),
  /**
   * Each part a line on stdout (`out:<text>`) or stderr (`err:<text>`); after part n it waits for the file `<dir>/<n>`
   * (see `releaseStep`), then answers `gated`.
   */
  gated: (dir: string, ...parts: Array<`out:${string}` | `err:${string}`>) => task('gated', dir, ...parts),
  /**
   * Lives until the file `gate` exists, appending `{ marker, event: 'start' | 'end', at }` lines to `log`,
   * then answers `spanned <marker>`.
   */
  span: (log: string, gate: string, marker: string) => task('span', log, gate, marker),
  /**
   * Edits files in its working directory, as an agent's file tools do, and answers `edited <its cwd>`:
   * `write:<path>:<text>` (each `\\n` in the text a newline), `delete:<path>`, `rename:<from>:<to>`.
   */
  edit: (...operations: Array<`write:${string}:${string}` | `delete:${string}` | `rename:${string}:${string}`>) =>
    task('edit', ...operations),
  /** A shell call every `ms`, `count` times, each shown as its CLI shows one (a response each); `<count> calls`. */
  toolCalls: (count: number, ms: number) => task('tool-calls', count, ms),
  /**
   * `count` shell calls at once, each shown as its CLI shows one, then it waits until the run is stopped (SIGINT):
   * a limit those calls cross ends it, with exactly their steps; a limit nobody holds it to leaves it to its deadline.
   */
  callsUntilStopped: (count: number) => task('calls-until-stopped', count),
  /** `count` shell calls, each showing `bytes` of output, as fast as its stdout is read; `<count> loud calls`. */
  loudCalls: (count: number, bytes: number) => task('loud-calls', count, bytes),
  /** `count` lines, `ms` apart, each the monotonic time of its write. */
  stamp: (count: number, ms: number) => task('stamp', count, ms),
  /**
   * `calls` shell calls (none unless asked), its pid in `pidFile`, then runs until released (see `heldAgent`) and
   * answers `released`.
   */
  hold: (pidFile: string, calls = 0) => (calls === 0 ? task('hold', pidFile) : task('hold', pidFile, calls)),
  /** Its pid in `pidFile`, then sleeps `ms` and answers `done`. */
  writePid: (pidFile: string, ms: number) => task('write-pid', pidFile, ms),
  /**
   * Runs `sudo <argv>` through its shell tool (what it printed shown as its CLI shows tool output) and answers
   * `sudo exited <code>`.
   */
  sudo: (...argv: string[]) => task('sudo', ...argv),
  /** A fork bomb through its shell (each process starts two more), touching `dir/bomb` once going; then waits. */
  forkBomb: (dir: string) => task('fork-bomb', dir),
  /** A child process that allocates and touches `mb` MiB and holds it; then waits. */
  allocate: (mb: number) => task('allocate', mb),
  /** Starts a chain of processes each in a new session with no environment, hopping to a new pid every 50 ms. */
  hopper: (dir: string, ms: number) => task('hopper', dir, ms),
  /**
   * Runs `argv` (no shell) through its shell tool, shown as its CLI shows a tool call; answers
   * `shell exited <code>`.
   */
  shell: (...argv: string[]) => task('shell', ...argv),
  /** What `ps -eo pid,args` shows the agent. */
  ps: () => task('ps'),
  /** What each of its file descriptors points at (readlink of /proc/self/fd/N). */
  fds: () => task('fds'),
  /** Its uid, HOME, USER, and whether it can read its parent's environment. */
  whoami: () => task('whoami'),
  /** Its whole environment, as JSON. */
  env: () => task('env'),
  /** `<dir>/<pid>.start` and `.end` on the monotonic clock around `ms` of sleep. */
  record: (dir: string, ms: number) => task('record', dir, ms),
  /** Kills itself with `signal`. */
  killSelf: (signal: NodeJS.Signals) => task('kill-self', signal),
  /** claude's stand-in: its result line names session `id` (a forged one: its CLI issued another). */
  reportSession: (id: string) => task('report-session', id),
  /** claude's stand-in: exits 0 with a report saying is_error (an API error). */
  isError: () => task('is-error'),
  /** opencode's stand-in: asks for a permission, which only --auto grants. */
  needsPermission: () => task('needs-permission')
}

/**
 * A stand-in that holds its slot until the test releases it: no race with a sleep running out on a slow machine.
 * `pidFile` is written once it runs (see `readPidFile`), after its `calls` shell calls if asked. The end of the test
 * releases it too (teardowns run last first: before its directory goes).
 */
export function heldAgent(t: Test, { calls = 0 } = {}): { task: string; pidFile: string; release: () => void } {
  const pidFile = join(tempDir(t), 'held.pid')
  const release = () => writeFileSync(`${pidFile}.release`, '')
  t.teardown(() => { try { release() } catch {} })
  return { task: scenario.hold(pidFile, calls), pidFile, release }
}

/** Lets a `gated` stand-in go on past part `step` (counted from 1): the parts seen so far, as whole lines. */
export const releaseStep = (dir: string, step: number) => writeFileSync(join(dir, String(step)), '')

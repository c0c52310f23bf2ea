import { spawn, type ChildProcess } from 'node:child_process'
import type { Readable } from 'node:stream'
import { once } from 'node:events'
import { performance } from 'node:perf_hooks'
import type { AgentUser } from './agent-user.js'
import type { ContainedRun, Containment, FileBind, LeftoverRecord, ToolLimits } from './containment.js'
import { AgentSpawnError, RunNotRecorded } from './spawn-error.js'
import type { StopReason } from '../schemas/run.js'
import { HeadTailBuffer } from './head-tail-buffer.js'
import type { LoopShare } from './loop-share.js'
import { RUN_MARK_VARIABLE } from './run-marks.js'

/** What is spawned: the agent itself, or the wsl.exe call that runs it. */
export interface AgentCommand {
  file: string
  args: string[]
  /** Host directory to spawn in; undefined inside WSL, where the directory travels as `--cd`. */
  cwd: string | undefined
  /** Written whole to its standard input, which is then closed (the task); undefined: stdin closed from the start. */
  input?: string | undefined
}

/**
 * How long the pipes may stay open once the agent has exited and what it left has been killed. Only a process that
 * escaped the containment (setsid, in process-group mode) can still hold them; past this, the run ends without its
 * last words.
 */
const DRAIN_AFTER_EXIT_MS = 1000

/**
 * What is told of the agent as it goes (its run): none of it may slow the agent. A reader that may, by falling behind,
 * is the `sink`.
 */
export interface AgentObserver {
  spawned?(pid: number): void
  /** Its stop has begun (asked for, or its deadline): told once, before the first signal. */
  stopping?(reason: StopReason): void
  output?(chunk: Buffer): void
  /**
   * Stdout alone, each chunk after `output` has: where a CLI writes its structured output (stderr is noise), so what
   * is read from a line follows the output that carries it.
   */
  stdout?(chunk: Buffer): void
}

/** Where and how the agent's processes are held: the containment, and what its launch of this run needs. */
interface RunContainment {
  by: Containment
  runId: string
  /** What the run's own mount namespace shows in place of other files, for a containment that `bindsFiles`. */
  binds?: readonly FileBind[] | undefined
  /** Its tool's own limits, over the service's, for a containment that bounds runs. */
  limits?: ToolLimits | undefined
  /** Told what a later life of the service would need to stop this run, and when nothing of it is left. */
  ledger?: RunTracker
}

/** When the agent is stopped unasked, and how long each stop signal is given before the next. */
interface Deadline {
  timeoutMs: number
  killGraceMs: number
}

/** Where the agent's output goes besides its observer, and at what pace it is read. */
interface OutputRouting {
  /** What the run keeps of it: its head and its tail, this many bytes in all. */
  limitBytes: number
  /** A reader of the live output that may fall behind: while it does, the agent's pipes pause (and the agent). */
  sink?: OutputSink | undefined
  /**
   * A reader of stdout alone that may fall behind but always catches up by itself (a parser on another thread): while
   * it is behind, the pipes pause, even while the agent is stopped (a stopping agent may still flood), so that what
   * waits for it stays bounded.
   */
  stdoutSink?: OutputSink | undefined
  /**
   * Read only in the turns of the event loop this share gives, one read (what the pipe held, 64 KiB or so) a turn, so
   * other runs and requests have theirs: libuv reads a readable pipe up to 32 × 64 KiB in a row, which a relay that
   * encodes every byte would spend the one thread on. Unset: read as fast as the pipes give (a relay that only copies).
   */
  turns?: LoopShare | undefined
}

export interface AgentRunOptions {
  command: AgentCommand
  containment: RunContainment
  /** AGENT_USER or the token's own user, on a host run. */
  user?: AgentUser | undefined
  env: NodeJS.ProcessEnv
  deadline: Deadline
  /** Aborting stops the agent; the abort reason (a StopReason) is reported as the run's stop_reason. */
  signal?: AbortSignal
  observer?: AgentObserver
  output: OutputRouting
}

interface RunTracker {
  started(record: LeftoverRecord): void
  ended(): void
}

export interface OutputSink {
  /** false when the reader is behind; the pipes then stay paused until the resume callback given to onDrain runs. */
  write(chunk: Buffer): boolean
  onDrain(resume: () => void): void
}

/** How the agent's process ended, and what it printed. */
export interface AgentEnd {
  pid: number
  exitCode: number | null
  signal: NodeJS.Signals | null
  stopReason: StopReason | null
  durationMs: number
  output: HeadTailBuffer
  /** The containment could not stop the run; its agent was ended directly, and what it started may still run. */
  containmentFailed: boolean
}

/** The run was stopped before its agent started (the client left, the service is closing): nothing was spawned. */
export class RunAbandoned extends Error {
  readonly reason: StopReason
  constructor(reason: StopReason) {
    super(`run abandoned before its agent started: ${reason}`)
    this.name = 'RunAbandoned'
    this.reason = reason
  }
}

const abortReason = (signal: AbortSignal): StopReason => (signal.reason as StopReason | undefined) ?? 'client_gone'

/**
 * Runs one agent to completion: no shell, stdin its task and then closed (the CLIs wait on an open one), stdout and
 * stderr merged into one bounded buffer, inside the containment that holds every process it starts. Stopping escalates
 * SIGINT (the only signal crush traps to wind down) → SIGTERM → SIGKILL, a grace period apart; once the agent exits,
 * whatever it left is killed before the run ends.
 */
export async function runAgent(options: AgentRunOptions): Promise<AgentEnd> {
  const { command, signal, env, user, deadline, output: routing } = options
  const { by: containment, runId, binds, limits, ledger } = options.containment
  const context = { env, cwd: command.cwd, user, runId, binds, limits }
  const launch = await containment.launch(command.file, command.args, context)
  // A client that left while the request was checked or queued for a slot: nothing starts.
  if (signal?.aborted) throw new RunAbandoned(abortReason(signal))
  const startedAt = performance.now()
  const child = spawn(launch.file, launch.args, {
    cwd: command.cwd,
    env: launch.mark === undefined ? env : { ...env, [RUN_MARK_VARIABLE]: launch.mark },
    // No task on stdin: /dev/null, not an empty pipe, which crush would read as a prompt of its own.
    stdio: [command.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    detached: launch.detached,
    ...(launch.uid === undefined ? {} : { uid: launch.uid, gid: launch.gid }),
    windowsHide: true
  })
  if (child.pid === undefined) {
    const [error] = (await once(child, 'error')) as [NodeJS.ErrnoException]
    throw new AgentSpawnError(error)
  }
  const pid = child.pid
  // An agent that ends without reading its task (a bad option, a crash) closes the pipe: EPIPE, which its exit tells.
  child.stdin?.on('error', () => {})
  child.stdin?.end(command.input)
  const contained = containment.control(child, launch)
  try {
    ledger?.started(contained.leftover)
  } catch (error) {
    await killUnrecorded(child, contained)
    throw new RunNotRecorded(error as Error)
  }
  const { observer = {} } = options
  observer.spawned?.(pid)

  const output = new HeadTailBuffer(routing.limitBytes)
  let stopReason: StopReason | null = null
  // Read through a function: set in callbacks, which a reading in line would not see.
  const stoppedFor = (): StopReason | null => stopReason
  // Both piped by the spawn above, whatever its stdin.
  const [stdout, stderr] = [child.stdout, child.stderr] as [Readable, Readable]
  const pipes = [stdout, stderr]
  // The pipes flow only while nothing holds them: a reader behind (the sink, the stdout sink), or this turn's share
  // already read.
  type Hold = 'sink' | 'stdout' | 'turn'
  const holds = new Set<Hold>()
  const hold = (reason: Hold): void => {
    if (holds.size === 0) for (const pipe of pipes) pipe.pause()
    holds.add(reason)
  }
  const release = (reason: Hold): void => {
    if (holds.delete(reason) && holds.size === 0) for (const pipe of pipes) pipe.resume()
  }
  const resume = (): void => {
    release('sink')
    release('turn')
  }
  // A stop may release a wait before its turn comes: that turn then must not release a later one.
  let turnWaits = 0
  const waitForTurn = (share: LoopShare): void => {
    hold('turn')
    const wait = ++turnWaits
    share.wait(() => {
      if (wait === turnWaits) release('turn')
    })
  }
  const collect = (chunk: Buffer): void => {
    output.push(chunk)
    observer.output?.(chunk)
    if (routing.sink?.write(chunk) === false && stopReason === null) {
      hold('sink')
      routing.sink.onDrain(() => release('sink'))
    }
    if (routing.turns !== undefined && !holds.has('turn')) waitForTurn(routing.turns)
  }
  // Even its first read waits for a turn: a crowd of runs starting together would otherwise all read in one.
  if (routing.turns !== undefined) waitForTurn(routing.turns)
  const { stdoutSink } = routing
  stdout.on('data', (chunk: Buffer) => {
    collect(chunk)
    observer.stdout?.(chunk)
    if (stdoutSink?.write(chunk) === false) {
      hold('stdout')
      stdoutSink.onDrain(() => release('stdout'))
    }
  })
  stderr.on('data', collect)

  let escalation: NodeJS.Timeout | undefined
  let containmentFailed = false
  const exited = (): boolean => child.exitCode !== null || child.signalCode !== null
  // The containment's own SIGKILL did not end the agent (taskkill refused /T, wsl.exe failed): no stop waits on a tool
  // that failed, so the direct child is ended (TerminateProcess on Windows) and the run says what may be left.
  const endDirectChild = (): void => {
    if (exited()) return
    containmentFailed = true
    child.kill('SIGKILL')
  }
  const stop = (reason: StopReason): void => {
    if (stopReason !== null || exited()) return
    stopReason = reason
    observer.stopping?.(reason)
    // A client that fell behind must not keep a stopping agent blocked on a full pipe.
    resume()
    const after = (next: () => void): void => { escalation = setTimeout(next, deadline.killGraceMs) }
    void contained.signal('SIGINT')
    after(() => {
      void contained.signal('SIGTERM')
      after(() => {
        void contained.signal('SIGKILL')
        after(endDirectChild)
      })
    })
  }
  const timeout = setTimeout(() => stop('timeout'), deadline.timeoutMs)
  contained.onLimit?.((reason) => stop(reason))
  const onAbort = (): void => stop(abortReason(signal!))
  if (signal?.aborted) onAbort()
  else signal?.addEventListener('abort', onAbort, { once: true })

  try {
    const [exitCode, exitSignal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null]
    const durationMs = Math.round(performance.now() - startedAt)
    clearTimeout(escalation)
    // A limit crossed as the run ended (a fork refused just before its exit) is its reason all the same.
    stopReason = stoppedFor() ?? contained.limitReached?.() ?? null
    await contained.sweep()
    ledger?.ended()
    // Nothing is left to slow down: what remains in the pipes (at most their capacity) flows to the reader now.
    resume()
    await waitForPipes(child)
    return { pid, ...contained.exit(exitCode, exitSignal), stopReason, durationMs, output, containmentFailed }
  } finally {
    clearTimeout(timeout)
    clearTimeout(escalation)
    signal?.removeEventListener('abort', onAbort)
  }
}

async function killUnrecorded(child: ChildProcess, contained: ContainedRun): Promise<void> {
  const exit = once(child, 'exit')
  await contained.sweep()
  child.kill('SIGKILL')
  await exit
  await contained.sweep()
}

async function waitForPipes(child: ChildProcess): Promise<void> {
  if (child.stdout!.closed && child.stderr!.closed) return
  const closed = once(child, 'close')
  const timer = setTimeout(() => {
    child.stdout!.destroy()
    child.stderr!.destroy()
  }, DRAIN_AFTER_EXIT_MS)
  try {
    await closed
  } finally {
    clearTimeout(timer)
  }
}

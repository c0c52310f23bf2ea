import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { performance } from 'node:perf_hooks'
import type { StopReason } from '../schemas/run.js'
import type { AgentCommand } from './command.js'
import { HeadTailBuffer } from './output.js'

/** Process groups are a POSIX notion: this is the real host, whatever AGENT_HOST_PLATFORM says about argv shape. */
const GROUPS_SUPPORTED = process.platform !== 'win32'

/**
 * How long the pipes may stay open once the agent has exited and its group has been killed. Only a process that
 * left the group (setsid) can still hold them; past this, the run ends without its last words.
 */
const DRAIN_AFTER_EXIT_MS = 1000

export interface AgentRunOptions {
  command: AgentCommand
  env: NodeJS.ProcessEnv
  timeoutMs: number
  killGraceMs: number
  outputLimitBytes: number
  /** Aborting stops the agent; the abort reason (a StopReason) is reported as the run's stop_reason. */
  signal?: AbortSignal
  onSpawn?: (pid: number) => void
  onOutput?: (chunk: Buffer) => void
  /** A reader of the live output that may fall behind: while it does, the agent's pipes pause (and so does the agent). */
  sink?: OutputSink
}

export interface OutputSink {
  /** false when the reader is behind; the pipes then stay paused until the resume callback given to onDrain runs. */
  write(chunk: Buffer): boolean
  onDrain(resume: () => void): void
}

export interface AgentRunOutcome {
  pid: number
  exitCode: number | null
  signal: NodeJS.Signals | null
  stopReason: StopReason | null
  durationMs: number
  output: HeadTailBuffer
}

/** The agent could not be started at all (binary missing, not executable, directory gone). */
export class AgentSpawnError extends Error {
  readonly errno: string | undefined
  constructor(cause: NodeJS.ErrnoException) {
    super(cause.message, { cause })
    this.name = 'AgentSpawnError'
    this.errno = cause.code
  }
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (GROUPS_SUPPORTED) process.kill(-child.pid!, signal)
    else child.kill(signal)
  } catch (error) {
    // ESRCH: the group is already gone, which is what we wanted.
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error
  }
}

/**
 * Runs one agent to completion: no shell, stdin closed (both CLIs wait on an open stdin), stdout and stderr merged into
 * one bounded buffer, the agent leading its own process group so that stopping it reaches every descendant.
 * Stopping escalates SIGINT (the only signal crush traps to wind down) → SIGTERM → SIGKILL, a grace period apart.
 */
export async function runAgent(options: AgentRunOptions): Promise<AgentRunOutcome> {
  const { command, signal } = options
  const startedAt = performance.now()
  const child = spawn(command.file, command.args, {
    cwd: command.cwd,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: GROUPS_SUPPORTED,
    windowsHide: true
  })
  if (child.pid === undefined) {
    const [error] = (await once(child, 'error')) as [NodeJS.ErrnoException]
    throw new AgentSpawnError(error)
  }
  const pid = child.pid
  options.onSpawn?.(pid)

  const output = new HeadTailBuffer(options.outputLimitBytes)
  let stopReason: StopReason | null = null
  const pipes = [child.stdout!, child.stderr!]
  const resume = (): void => {
    for (const pipe of pipes) pipe.resume()
  }
  const collect = (chunk: Buffer): void => {
    output.push(chunk)
    options.onOutput?.(chunk)
    if (options.sink?.write(chunk) === false && stopReason === null) {
      for (const pipe of pipes) pipe.pause()
      options.sink.onDrain(resume)
    }
  }
  child.stdout!.on('data', collect)
  child.stderr!.on('data', collect)

  let escalation: NodeJS.Timeout | undefined
  const stop = (reason: StopReason): void => {
    if (stopReason !== null || child.exitCode !== null || child.signalCode !== null) return
    stopReason = reason
    // A reader that fell behind must not keep a stopping agent blocked on a full pipe.
    resume()
    signalGroup(child, 'SIGINT')
    escalation = setTimeout(() => {
      signalGroup(child, 'SIGTERM')
      escalation = setTimeout(() => signalGroup(child, 'SIGKILL'), options.killGraceMs)
    }, options.killGraceMs)
  }
  const deadline = setTimeout(() => stop('timeout'), options.timeoutMs)
  const onAbort = (): void => stop((signal?.reason as StopReason | undefined) ?? 'client_gone')
  if (signal?.aborted) onAbort()
  else signal?.addEventListener('abort', onAbort, { once: true })

  try {
    const [exitCode, exitSignal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null]
    const durationMs = Math.round(performance.now() - startedAt)
    // Descendants the agent left behind (daemons, stuck tools) go with it.
    signalGroup(child, 'SIGKILL')
    // Nothing is left to slow down: what remains in the pipes (at most their capacity) flows to the reader now.
    resume()
    await waitForPipes(child)
    return { pid, exitCode, signal: exitSignal, stopReason, durationMs, output }
  } finally {
    clearTimeout(deadline)
    clearTimeout(escalation)
    signal?.removeEventListener('abort', onAbort)
  }
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

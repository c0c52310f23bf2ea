import type { ChildProcess } from 'node:child_process'
import type { ContainmentMode } from '../schemas/health.js'
import type { AgentUser } from './agent-user.js'
import type { LimitReached } from './run-cgroups.js'

/** The signals a run is stopped with, in this order, a grace period apart. */
export type StopSignal = 'SIGINT' | 'SIGTERM' | 'SIGKILL'

/** A program and its arguments, as spawn takes them. */
export interface Command {
  file: string
  args: string[]
}

/** What to spawn for an agent's argv, contained. */
interface Launch extends Command {
  /** Whether the spawned process must lead a new session and process group (POSIX). */
  detached: boolean
  /** The identity spawn itself switches to, when the containment does not (process-group with AGENT_USER). */
  uid?: number
  gid?: number
  /** The run's mark (run-marks.ts), for a containment that finds the run's processes by their environment. */
  mark?: string
  /** A uid only this service's runs of one token use (AGENT_USERS): what is left of it is swept by identity. */
  ownUid?: number
}

/** A file the run's own mount namespace shows at another's path: `source`'s content (and mode) at `target`. */
export interface FileBind {
  source: string
  target: string
}

/** What the agent will be started with, for a containment that has to look at the host first. */
interface LaunchContext {
  env: NodeJS.ProcessEnv
  cwd: string | undefined
  /** AGENT_USER: who the agent runs as, when not the service's own user. */
  user?: AgentUser | undefined
  runId: string
  /** In order, for a containment that `bindsFiles`; ignored by the others. */
  binds?: readonly FileBind[] | undefined
  /** This run's own limits (its tool's), over the service's, for a containment that bounds runs. */
  limits?: ToolLimits | undefined
}

/** A tool's own limits (`<AGENT>_MAX_PROCESSES`, `<AGENT>_MAX_MEMORY_MB`): each unset one is the service's. */
export interface ToolLimits {
  processes?: number
  memoryBytes?: number
}

/** How the agent itself ended, once the containment's own wrappers are seen through. */
interface AgentExit {
  exitCode: number | null
  signal: NodeJS.Signals | null
}

/** What a later life of the service needs to stop a run this one left behind (see ledger.ts). */
export type LeftoverRecord =
  | { kind: 'host-group'; pid: number; startTime: string | null }
  | { kind: 'wsl-group'; distro: string; user: string | undefined; runId: string }
  /** Windows reuses pids quickly and keeps no start time a later life could check: recorded, never acted on. */
  | { kind: 'windows-tree'; pid: number }

/** One way of containing and stopping runs; each platform is one implementation of it. */
export interface Containment {
  /**
   * How strongly a run's processes are held together, strongest first:
   * - `pid-namespace`: the agent runs in its own PID namespace under an init (tini); when it ends, the kernel kills
   *   every process left in the namespace, whatever session or group it moved to; the service's death ends it too.
   * - `process-group`: the agent leads its own process group, and every process of the run carries the run's mark in
   *   its environment: a process that leaves the group (setsid, a daemon) is still found by its mark (Linux's /proc);
   *   only one that also clears its environment escapes.
   * - `wsl-process-group`: inside a WSL distro, the agent leads a process group the service signals through wsl.exe.
   * - `windows-tree`: native Windows, the agent's process tree ended with taskkill.
   */
  readonly mode: ContainmentMode
  /** Each run has a mount namespace of its own, made as root: what `binds` asks is seen there, and nowhere else. */
  readonly bindsFiles?: boolean
  /** May reject with AgentSpawnError, as a spawn that cannot start the agent would. */
  launch(file: string, args: string[], context: LaunchContext): Promise<Launch>
  /** Takes charge of a run spawned as `launch` says. */
  control(child: ChildProcess, launch: Launch): ContainedRun
}

export interface ContainedRun {
  /** Delivers a stop signal to everything the run started that the mode can reach. Never throws. */
  signal(signal: StopSignal): Promise<void>
  /**
   * After the agent's exit: kills whatever it left. Resolves once nothing is left (or SIGKILL was sent). Never
   * throws.
   */
  sweep(): Promise<void>
  exit(code: number | null, signal: NodeJS.Signals | null): AgentExit
  readonly leftover: LeftoverRecord
  /** A containment that bounds the run (a cgroup of its own): told once, when the run crosses one of its limits. */
  onLimit?(listener: (reason: LimitReached) => void): void
  /** After the run: the limit it crossed, if it did (a fork refused at the limit leaves no other trace). */
  limitReached?(): LimitReached | null
}

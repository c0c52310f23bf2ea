import { createHash } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { processGroupOf } from './posix-signals.js'
import { procFilesMatching } from './proc-pids.js'

/**
 * The variable every process of a run inherits in process-group mode, the way Jenkins' ProcessTreeKiller marks a
 * build's processes with its cookie: a process that leaves the agent's group (setsid, a daemon) still carries it, so
 * the run's end finds it in /proc. Only a process that clears or rewrites its environment (`env -i`, sudo's env_reset)
 * sheds it.
 */
export const RUN_MARK_VARIABLE = 'AGENT_RUNNER_RUN'

/**
 * Which service and which of its lives a mark belongs to: `service` names DATA_DIR (one service per DATA_DIR), so two
 * services on one host never take each other's processes; `life` names this start, so the next start can tell a
 * killed life's leftovers from its own runs.
 */
export interface ServiceLife {
  service: string
  life: string
}

export function serviceLife(dataDir: string, life: string): ServiceLife {
  return { service: createHash('sha256').update(dataDir).digest('hex').slice(0, 16), life }
}

export const runMark = ({ service, life }: ServiceLife, runId: string): string => `${service}.${life}.${runId}`

/** A mark of this service left by another of its lives: what a killed service left running. */
export const isEarlierLife = ({ service, life }: ServiceLife) => (mark: string): boolean =>
  mark.startsWith(`${service}.`) && !mark.startsWith(`${service}.${life}.`)

const MARK_PREFIX = Buffer.from(`${RUN_MARK_VARIABLE}=`)
const MARK_ENTRY = Buffer.from(`\0${RUN_MARK_VARIABLE}=`)

/** Where the mark's value starts in an environ block, or -1: one search of the whole block, not one per entry. */
function markStart(environ: Buffer): number {
  if (environ.subarray(0, MARK_PREFIX.length).equals(MARK_PREFIX)) return MARK_PREFIX.length
  const at = environ.indexOf(MARK_ENTRY)
  return at === -1 ? -1 : at + MARK_ENTRY.length
}

/** The mark in one environ block (NUL-separated `NAME=value` entries), if any. */
export function markIn(environ: Buffer): string | undefined {
  const start = markStart(environ)
  if (start === -1) return undefined
  const end = environ.indexOf(0, start)
  return environ.subarray(start, end === -1 ? environ.length : end).toString()
}

/**
 * The processes whose environment carries a mark `matches` accepts. A process whose environment cannot be read (another
 * user's, for a service that is not root; gone meanwhile; a zombie, whose environment is already empty) is not one.
 * No /proc (macOS): none.
 */
function markedProcesses(matches: (mark: string) => boolean): Promise<number[]> {
  return procFilesMatching('environ', (environ) => {
    const mark = markIn(environ)
    return mark !== undefined && matches(mark)
  })
}

/** Whether a process of group `pgid` carries a mark `matches` accepts. */
export async function groupCarriesMark(pgid: number, matches: (mark: string) => boolean): Promise<boolean> {
  return (await markedProcesses(matches)).some((pid) => processGroupOf(pid) === pgid)
}

function send(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal)
  } catch {
    // gone meanwhile
  }
}

export async function signalMarked(
  matches: (mark: string) => boolean,
  signal: NodeJS.Signals,
  only: (pid: number) => boolean
): Promise<void> {
  for (const pid of await markedProcesses(matches)) if (only(pid)) send(pid, signal)
}

/** Rounds of SIGKILL before giving up on a process that will not die (stuck in the kernel): it then stays reported. */
const KILL_ROUNDS = 50
const ROUND_PAUSE_MS = 20

/**
 * SIGKILLs every marked process until none is left: a process forking while it is killed hands the mark to its child,
 * which the next round finds. Returns how many were killed.
 */
export async function killMarked(matches: (mark: string) => boolean): Promise<number> {
  const killed = new Set<number>()
  for (let round = 0; round < KILL_ROUNDS; round++) {
    const found = await markedProcesses(matches)
    if (found.length === 0) break
    for (const pid of found) {
      send(pid, 'SIGKILL')
      killed.add(pid)
    }
    await sleep(ROUND_PAUSE_MS)
  }
  return killed.size
}

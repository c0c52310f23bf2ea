import { constants } from 'node:os'
import { readFileSync } from 'node:fs'

/** Sends a signal to a whole process group; a group already gone is what was wanted. */
export function signalGroup(leader: number, signal: NodeJS.Signals): void {
  // Every run's last sweep finds its group gone: that ESRCH is the expected answer, not worth a stack trace.
  const stackTraceLimit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    process.kill(-leader, signal)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error
  } finally {
    Error.stackTraceLimit = stackTraceLimit
  }
}

const SIGNAL_NAMES = new Map(
  Object.entries(constants.signals).map(([name, number]) => [number, name as NodeJS.Signals])
)

/**
 * An init (tini, a shell) reports a child killed by signal N as exit status 128 + N: read it back as the signal, the
 * way a shell user would.
 */
export function exitThroughInit(
  code: number | null,
  signal: NodeJS.Signals | null
): { exitCode: number | null; signal: NodeJS.Signals | null } {
  if (code !== null && code > 128) {
    const name = SIGNAL_NAMES.get(code - 128)
    if (name !== undefined) return { exitCode: null, signal: name }
  }
  return { exitCode: code, signal }
}

/**
 * The fields of /proc/PID/stat after the command name, which is in parentheses and may hold spaces and `)`: field 3
 * (the state) is the first. null once the process is gone, or where /proc is missing.
 */
function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  } catch {
    return null
  }
}

/** The process group a process is in (field 5 of /proc/PID/stat); null once it is gone, or where /proc is missing. */
export function processGroupOf(pid: number): number | null {
  const group = statFields(pid)?.[2]
  return group === undefined ? null : Number(group)
}

/**
 * When the process started, in clock ticks since boot (field 22 of /proc/PID/stat): with the pid, it names one process
 * for good, so a later life of the service never signals a stranger that reused the pid. null where /proc is missing.
 */
export function processStartTime(pid: number): string | null {
  return statFields(pid)?.[19] ?? null
}

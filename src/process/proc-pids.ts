import { closeSync, existsSync, openSync, readSync } from 'node:fs'
import { readdir } from 'node:fs/promises'
import { setImmediate as nextTurn } from 'node:timers/promises'

/** Every process /proc lists now, by pid; none where there is no /proc (macOS). */
async function procPids(): Promise<number[]> {
  let entries: string[]
  try {
    entries = await readdir('/proc')
  } catch {
    return []
  }
  return entries.filter((entry) => /^\d+$/.test(entry)).map(Number)
}

/**
 * How many processes' files are read in one go before the event loop gets its turn back: a few hundred µs of reads
 * (about 7 µs a process here), so a scan of a crowded machine never holds requests up for long.
 */
const BATCH = 64

/** Shared by every scan: a scan's reads are synchronous, so no two of them ever use it at once. */
let shared = Buffer.allocUnsafe(64 * 1024)

/** One /proc file whole, read into the shared buffer (grown for a larger one); null when it cannot be read. */
function readWhole(path: string): Buffer | null {
  let fd: number
  try {
    fd = openSync(path, 'r')
  } catch {
    return null
  }
  try {
    let length = 0
    for (;;) {
      if (length === shared.length) {
        const grown = Buffer.allocUnsafe(shared.length * 2)
        shared.copy(grown)
        shared = grown
      }
      const read = readSync(fd, shared, length, shared.length - length, null)
      if (read === 0) return shared.subarray(0, length)
      length += read
    }
  } catch {
    return null
  } finally {
    closeSync(fd)
  }
}

/**
 * Reads one file of every process (`environ`, `status`) and keeps the pids `keep` accepts, given its bytes (valid only
 * during the call). Synchronous reads into one buffer, in batches with a turn of the event loop between them: an async
 * readFile per process went through the thread pool four times (open, fstat, read, close) and cost 26× the CPU
 * (477 processes: 78 ms against 3 ms, bench/findings.md). A file that cannot be read (another user's, gone meanwhile)
 * is kept by none, nor is the service itself.
 */
export async function procFilesMatching(file: string, keep: (contents: Buffer) => boolean): Promise<number[]> {
  const pids = await procPids()
  const found: number[] = []
  for (let start = 0; start < pids.length; start += BATCH) {
    if (start > 0) await nextTurn()
    for (const pid of pids.slice(start, start + BATCH)) {
      if (pid === process.pid) continue
      const contents = readWhole(`/proc/${String(pid)}/${file}`)
      if (contents !== null && keep(contents)) found.push(pid)
    }
  }
  return found
}

/**
 * The last pid the kernel handed out in the service's PID namespace (threads' ids included); undefined where it cannot
 * be read. Pids are handed out in turn, so while it still reads a process's own pid, nothing at all (that process's
 * children included) has been started since it was.
 */
export function lastPid(): number | undefined {
  const buffer = readWhole('/proc/sys/kernel/ns_last_pid')
  const pid = buffer === null ? NaN : Number(buffer.toString('latin1'))
  return Number.isInteger(pid) ? pid : undefined
}

/** Whether `id` is one of the threads of process `pid` (its own pid included). */
export const isThreadOf = (pid: number, id: number): boolean => existsSync(`/proc/${String(pid)}/task/${String(id)}`)

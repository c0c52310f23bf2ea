import { createHash } from 'node:crypto'
import { chmodSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { connect, createServer } from 'node:net'
import { join, resolve as absolute } from 'node:path'
import { processStartTime } from './process/posix-signals.js'

/** DATA_DIR, held by this service alone for its whole life. */
export interface DataDirClaim {
  dir: string
  /** What had to be repaired (a directory others could read), for the startup log. */
  repaired: string | null
  release(): void
}

interface Holder {
  pid: number
  startTime: string | null
}

const LOCK_FILE = 'service.lock'

/** The one service that may own DATA_DIR is elsewhere: starting would kill its agents as a previous life's. */
class DataDirInUse extends Error {
  constructor(dir: string, holder: Holder | null) {
    super(
      `DATA_DIR ${dir} is in use by another agent-runner${holder === null ? '' : ` (pid ${String(holder.pid)})`}: ` +
      'one service per DATA_DIR; stop it, or give this one a DATA_DIR of its own'
    )
    this.name = 'DataDirInUse'
  }
}

function isAlive(holder: Holder): boolean {
  try {
    process.kill(holder.pid, 0)
  } catch (error) {
    // EPERM: alive, someone else's.
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false
  }
  // The same pid under another start time is a stranger that reused it: the holder is gone.
  return holder.startTime === null || processStartTime(holder.pid) === holder.startTime
}

function readHolder(path: string): Holder | null {
  try {
    const holder = JSON.parse(readFileSync(path, 'utf8')) as Partial<Holder>
    return typeof holder.pid === 'number' ? { pid: holder.pid, startTime: holder.startTime ?? null } : null
  } catch {
    return null
  }
}

/**
 * Private to the service: agents running as another user must not read its runs' tasks and outputs. `crossed`: the
 * agents' users go through it to their homes and worktrees (0711: never listed, every file in it 0600).
 */
function makePrivate(dir: string, crossed: boolean): string | null {
  const wanted = crossed ? 0o711 : 0o700
  mkdirSync(dir, { recursive: true, mode: wanted })
  if (process.platform === 'win32') return null
  const mode = statSync(dir).mode & 0o777
  if (mode === wanted || (!crossed && (mode & 0o077) === 0)) return null
  chmodSync(dir, wanted)
  return crossed
    ? `DATA_DIR ${dir} had mode ${mode.toString(8)}: now 0711 (agents' users cross it to their homes and worktrees)`
    : `DATA_DIR ${dir} was readable by others (mode ${mode.toString(8)}): now 0700`
}

/** The pipe a DATA_DIR is held by: its name from the directory's (Windows paths are case-insensitive). */
export const pipeName = (dir: string): string =>
  `\\\\.\\pipe\\agent-runner-${createHash('sha256').update(dir.toLowerCase()).digest('hex').slice(0, 32)}`

/** Whether something listens on the pipe `name`. */
function answers(name: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(name)
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

/**
 * Windows: a named pipe, held open for the service's life, whose name comes from DATA_DIR. The system closes it with
 * its holder however that ends, so a crash never locks the directory; Windows keeps no start time a pid could be
 * checked against, and reuses pids at once (under Wine the next service got the dead one's pid, and took the lock
 * naming it for its own holder alive).
 */
export async function holdPipe(name: string, dir: string): Promise<DataDirClaim['release']> {
  // A holder answers: it is alive. (Windows refuses a second server of one name too, FILE_FLAG_FIRST_PIPE_INSTANCE;
  // Wine 8 does not, and two starts one after the other are told apart here.)
  if (await answers(name)) throw new DataDirInUse(dir, null)
  const server = createServer((socket) => socket.destroy())
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      reject(error.code === 'EADDRINUSE' ? new DataDirInUse(dir, null) : error)
    })
    server.listen(name, () => resolve())
  })
  server.unref()
  return () => { server.close() }
}

/**
 * Takes DATA_DIR for this service before anything in it is acted on: a second service on the same directory would
 * otherwise take the first one's running agents for a previous life's leftovers and kill them. On POSIX the lock is a
 * file naming the holder by pid and start time, so a holder killed with SIGKILL never locks the directory for good;
 * on Windows a named pipe the system releases with its holder.
 */
export async function claimDataDir(dataDir: string, crossed = false): Promise<DataDirClaim> {
  const dir = absolute(dataDir)
  const repaired = makePrivate(dir, crossed)
  if (process.platform === 'win32') return { dir, repaired, release: await holdPipe(pipeName(dir), dir) }
  const path = join(dir, LOCK_FILE)
  const me: Holder = { pid: process.pid, startTime: processStartTime(process.pid) }
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(path, JSON.stringify(me), { flag: 'wx', mode: 0o600 })
      break
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      const holder = readHolder(path)
      // Two starts racing for a stale lock: only one removes it and wins the create; the other meets the winner.
      if (attempt > 0 || (holder !== null && isAlive(holder))) throw new DataDirInUse(dir, holder ?? me)
      rmSync(path, { force: true })
    }
  }
  let released = false
  return {
    dir,
    repaired,
    release: () => {
      if (released) return
      released = true
      const holder = readHolder(path)
      if (holder?.pid === me.pid && holder.startTime === me.startTime) rmSync(path, { force: true })
    }
  }
}

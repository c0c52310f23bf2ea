import { existsSync, readdirSync, readFileSync } from 'node:fs'

/** A zombie waiting for init to reap it is dead for our purposes, though kill(pid, 0) still succeeds on it. */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    return false
  }
}

/**
 * Processes whose command line mentions a marker, to prove none is left behind, each as `ps -eo pid=,args=` lists it.
 * Read from /proc as ps does, without starting it: tests poll this every 20 ms, and a ps each time (fork, exec, a
 * read of every process) held the test's own event loop, the service in it included, most of the time.
 */
export function processesMatching(marker: string): string[] {
  const found: string[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    let commandLine: string
    try {
      commandLine = readFileSync(`/proc/${entry}/cmdline`, 'utf8')
    } catch {
      continue
    }
    // A kernel thread's or a zombie's is empty: ps shows its name in brackets, which carries no marker.
    const args = commandLine.replace(/\0$/, '').replaceAll('\0', ' ')
    if (args.includes(marker)) found.push(`${entry} ${args}`)
  }
  return found
}

/** SIGKILL's bit in /proc's signal masks. */
const SIGKILL_BIT = 1n << 8n

/**
 * Whether a listed process is already on its way out: SIGKILL sent and not yet acted on (it ends at its next turn on a
 * CPU), a zombie, or gone since the listing.
 */
function dying(line: string): boolean {
  let status: string
  try {
    status = readFileSync(`/proc/${line.trim().split(/\s+/)[0]}/status`, 'utf8')
  } catch {
    return true
  }
  const pending = [...status.matchAll(/^(?:SigPnd|ShdPnd):\s*([0-9a-f]+)$/gm)].map((match) => BigInt(`0x${match[1]}`))
  return /^State:\s*[ZX]/m.test(status) || pending.some((mask) => (mask & SIGKILL_BIT) !== 0n)
}

/**
 * The processes matching `marker` that nothing is ending: a process SIGKILLed a moment ago is still listed until the
 * kernel runs it, and is not counted. Anything else gets half a second (the last steps of an exit) before it counts.
 */
export const processesLeft = async (marker: string): Promise<string[]> => {
  const left = () => processesMatching(marker).filter((line) => !dying(line))
  return until(left, (lines) => lines.length === 0, 500, `no process matching ${marker}`).catch(left)
}

/** How often the polls below look again. */
const POLL_MS = 20

/**
 * Polls `read` until `done` holds for what it returned, and returns that value for the test to assert on. Throws on
 * timeout, with the last value read: a state never reached fails the test with what was there instead.
 */
export async function until<T>(
  read: () => T | Promise<T>, done: (value: T) => boolean, timeoutMs = 5000, what = 'condition'
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last seen: ${JSON.stringify(value)}`)
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS))
  }
}

/** Polls a condition (a precondition of what the test goes on to check); throws on timeout. */
export async function waitFor(predicate: () => boolean, timeoutMs = 5000, what = 'condition'): Promise<void> {
  await until(predicate, (reached) => reached, timeoutMs, what)
}

/**
 * Polls `read` until its value has stopped changing for `quietMs`, and returns it. Proving that something no longer
 * moves needs some time to pass with nothing happening: `quietMs` is that time, and nothing else here sleeps.
 */
export async function settledValue<T>(
  read: () => T, quietMs: number, timeoutMs = 20_000, what = 'a value to settle'
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let value = read()
  let since = Date.now()
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS))
    const next = read()
    if (next !== value) {
      value = next
      since = Date.now()
    } else if (Date.now() - since >= quietMs) {
      return value
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last seen: ${JSON.stringify(value)}`)
    }
  }
}

export async function readPidFile(path: string, timeoutMs = 10_000): Promise<number> {
  const text = await until(
    () => (existsSync(path) ? readFileSync(path, 'utf8') : ''), (content) => content !== '', timeoutMs,
    `pid file ${path}`
  )
  return Number(text)
}

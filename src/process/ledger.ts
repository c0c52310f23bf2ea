import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { LeftoverRecord } from './containment.js'
import { processStartTime } from './posix-signals.js'
import { signalWslRun } from './wsl-group.js'

export interface Leftover {
  runId: string
  record: LeftoverRecord
  /** Whether something of it was still running and has been sent SIGKILL. */
  stopped: boolean
}

/**
 * One file per running agent under DATA_DIR/live, written when it starts and removed once nothing of it is left. A
 * file still there at start names a run that a previous life of the service could not end (it was killed, or the
 * machine lost power): what is left of it is stopped before this life runs anything.
 */
export class RunLedger {
  readonly #dir: string

  constructor(dataDir: string) {
    this.#dir = join(dataDir, 'live')
    mkdirSync(this.#dir, { recursive: true, mode: 0o700 })
  }

  started(runId: string, record: LeftoverRecord): void {
    writeFileSync(join(this.#dir, `${runId}.json`), JSON.stringify(record), { mode: 0o600 })
  }

  ended(runId: string): void {
    rmSync(join(this.#dir, `${runId}.json`), { force: true })
  }

  /** Stops what previous lives left and forgets them; returns what was found. */
  async stopLeftovers(env: NodeJS.ProcessEnv): Promise<Leftover[]> {
    const leftovers: Leftover[] = []
    for (const name of readdirSync(this.#dir).filter((file) => file.endsWith('.json'))) {
      const runId = name.slice(0, -'.json'.length)
      const path = join(this.#dir, name)
      let record: LeftoverRecord
      try {
        record = JSON.parse(readFileSync(path, 'utf8')) as LeftoverRecord
      } catch {
        // a file cut short by the crash itself: nothing to act on
        rmSync(path, { force: true })
        continue
      }
      leftovers.push({ runId, record, stopped: await stopLeftover(runId, record, env) })
      rmSync(path, { force: true })
    }
    return leftovers
  }
}

async function stopLeftover(runId: string, record: LeftoverRecord, env: NodeJS.ProcessEnv): Promise<boolean> {
  if (record.kind === 'wsl-group') {
    await signalWslRun(record, runId, 'SIGKILL', env, 0)
    return true
  }
  if (record.kind === 'windows-tree') return false
  // Only the group that was recorded. While any process is in it, its number cannot be given to a new process; so a
  // live process under that pid that started at another time means the group died and the number went to a stranger.
  const current = processStartTime(record.pid)
  if (record.startTime === null || (current !== null && current !== record.startTime)) return false
  try {
    process.kill(-record.pid, 'SIGKILL')
    return true
  } catch {
    return false
  }
}

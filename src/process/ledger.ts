import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { LeftoverRecord } from './containment.js'
import { processStartTime } from './posix-signals.js'
import { groupCarriesMark, isEarlierLife, type ServiceLife } from './run-marks.js'
import { signalWslRun } from './wsl-group.js'

export interface Leftover {
  runId: string
  record: LeftoverRecord
  /** Whether something of it was still running and has been sent SIGKILL. */
  stopped: boolean
}

/** What a start acts with: its own settings, never a program or a target named in a file. */
interface LeftoverContext {
  env: NodeJS.ProcessEnv
  life: ServiceLife
  /** WSL_BIN as configured now: a record names a run, not the program that stops it. */
  wslBin: string
}

const RUN_ID = /^[0-9a-zA-Z-]{1,64}$/
/** As the request schema names distros and users, and never an option: not starting with a dash. */
const WSL_NAME = /^[a-zA-Z0-9._][a-zA-Z0-9._-]{0,63}$/

/** A record as this service writes them, or null: anything else in the directory is not acted on. */
function asRecord(value: unknown): LeftoverRecord | null {
  if (typeof value !== 'object' || value === null) return null
  const record = value as Record<string, unknown>
  const pid = record['pid']
  const isPid = typeof pid === 'number' && Number.isInteger(pid) && pid > 1
  switch (record['kind']) {
    case 'host-group': {
      const startTime = record['startTime']
      return isPid && (typeof startTime === 'string' || startTime === null)
        ? { kind: 'host-group', pid, startTime }
        : null
    }
    case 'wsl-group': {
      const { distro, user, runId } = record
      const ok = typeof distro === 'string' && WSL_NAME.test(distro) &&
        (user === undefined || (typeof user === 'string' && WSL_NAME.test(user))) &&
        typeof runId === 'string' && RUN_ID.test(runId)
      return ok ? { kind: 'wsl-group', distro, user, runId } : null
    }
    case 'windows-tree':
      return isPid ? { kind: 'windows-tree', pid } : null
    default:
      return null
  }
}

/**
 * One file per running agent under DATA_DIR/live, written when it starts and removed once nothing of it is left. A
 * file still there at start names a run that a previous life of the service could not end (it was killed, or the
 * machine lost power): what is left of it is stopped before this life runs anything. A record is data: it names a run,
 * and is acted on only when what it names proves to be that run.
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
  async stopLeftovers(context: LeftoverContext): Promise<Leftover[]> {
    const leftovers: Leftover[] = []
    for (const name of readdirSync(this.#dir).filter((file) => file.endsWith('.json'))) {
      const runId = name.slice(0, -'.json'.length)
      const path = join(this.#dir, name)
      let record: LeftoverRecord | null
      try {
        record = asRecord(JSON.parse(readFileSync(path, 'utf8')))
      } catch {
        // a file cut short by the crash itself: nothing to act on
        record = null
      }
      if (record !== null && RUN_ID.test(runId)) {
        leftovers.push({ runId, record, stopped: await stopLeftover(runId, record, context) })
      }
      rmSync(path, { force: true })
    }
    return leftovers
  }
}

async function stopLeftover(runId: string, record: LeftoverRecord, context: LeftoverContext): Promise<boolean> {
  if (record.kind === 'wsl-group') {
    await signalWslRun({ ...record, wslBin: context.wslBin }, runId, 'SIGKILL', context.env, 0)
    return true
  }
  if (record.kind === 'windows-tree') return false
  // Only the group that was recorded. While any process is in it, its number cannot be given to a new process; so a
  // live process under that pid that started at another time means the group died and the number went to a stranger.
  const current = processStartTime(record.pid)
  if (record.startTime === null || (current !== null && current !== record.startTime)) return false
  // And only a group that is one of this service's runs: a record written by someone else names someone else's.
  if (!(await groupCarriesMark(record.pid, isEarlierLife(context.life)))) return false
  try {
    process.kill(-record.pid, 'SIGKILL')
    return true
  } catch {
    return false
  }
}

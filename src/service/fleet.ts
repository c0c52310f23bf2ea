import fp from 'fastify-plugin'
import { writeFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import type { ToolName } from '../agents/catalog.js'
import { ServiceError } from '../errors.js'
import type { MemberRoll } from '../fleet/members.js'
import type { FleetMember } from '../schemas/health.js'
import type { FirstWord, FleetOptions, RunPlace } from '../fleet/run-jobs.js'
import type { HandedRun, RunFleet, WorkerAnswer } from '../runs/hand-over.js'

// The fleet's queues (issue 40, src/fleet/run-jobs.ts on BullMQ): an API replica (ROLE=api) hands its runs to them, a
// worker (ROLE=worker) takes them and runs them through its own registry, as if they had been asked of it.

/** How long an admitted run waits for a worker with room for its tool before it is taken back (503 NO_WORKER). */
export const TAKE_WITHIN_MS = 10_000

/** ROLE=api: the queues runs are handed to, closed with the service. BullMQ is loaded only by a fleet's roles. */
export async function runQueues(
  options: FleetOptions, tools: readonly string[], onClose: (close: () => Promise<void>) => void
): Promise<RunFleet & { waiting: (tool: string) => Promise<number> }> {
  const { RunDispatch } = await import('../fleet/run-jobs.js')
  const dispatch = new RunDispatch(options, tools)
  onClose(() => dispatch.close())
  await dispatch.ready()
  return {
    waiting: (tool) => dispatch.waiting(tool),
    handOver: async (tool, runId, run) => {
      const handed = await dispatch.handOver(tool, runId, run, placeOf(run))
      return {
        answer: handed.answer.then(workerAnswer),
        ended: handed.ended.then(() => undefined),
        withdraw: handed.withdraw,
        onGivenBack: handed.onGivenBack
      }
    }
  }
}

/** The queue a run waits in: one asking for a WSL distro, only Windows workers are offered. */
const placeOf = (run: HandedRun): RunPlace => run.wsl === true ? 'wsl' : 'host'

/** A worker's first word as runs/ reads it: started, refused as a local run would be, or lost. */
function workerAnswer(first: FirstWord): WorkerAnswer | { lost: true } {
  if ('reported' in first) return { started: true }
  switch (first.end) {
    case 'lost': return { lost: true }
    // A run that ends before its worker's first report was refused there: its refusal is what it returned.
    case 'completed': return first.value as WorkerAnswer
    // The worker's own failure, not the run's: what any unexpected error is.
    case 'failed': return { refused: { code: 'INTERNAL_ERROR', message: 'Internal server error' } }
  }
}

export interface MembershipOptions {
  fleet: FleetOptions
  /** Who this process is in the fleet; its host is the machine's name. */
  self: Pick<FleetMember, 'id' | 'role' | 'agents' | 'places'>
  /** HEALTH_FILE: rewritten each time the fleet's Redis took this member's renewal. */
  healthFile: string | undefined
}

/**
 * ROLE=api and ROLE=worker: on the fleet's roll while the service runs (left on close, struck off by the others once
 * silent for the TTL). A worker listens to nothing: its liveness is HEALTH_FILE's time, renewed with its place on the
 * roll.
 */
export async function joinFleet(
  { fleet, self, healthFile }: MembershipOptions, onClose: (close: () => Promise<void>) => void
): Promise<MemberRoll> {
  const { MemberRoll } = await import('../fleet/members.js')
  const roll = new MemberRoll({ url: fleet.url, prefix: fleet.prefix, ttlMs: fleet.lockDurationMs })
  onClose(() => roll.close())
  const startedAt = new Date().toISOString()
  const touch = async (file: string): Promise<void> => { await writeFile(file, `${new Date().toISOString()}\n`) }
  // The first write tells at start whether the file can be written (a probe of an unwritable one fails forever).
  if (healthFile !== undefined) await touch(healthFile)
  await roll.join({ ...self, host: hostname(), started_at: startedAt }, () => {
    if (healthFile !== undefined) touch(healthFile).catch(() => undefined)
  })
  return roll
}

export interface WorkersOptions {
  fleet: FleetOptions
  /** This worker's name, as the fleet's queues list it: its replica id. */
  name: string
  /** The tools it takes, each with how many runs at once (WORKER_MAX_<AGENT>_AGENTS above 0). */
  concurrency: Record<string, number>
  /** Where on this host it runs them: into WSL too on a Windows host. */
  places: readonly RunPlace[]
}

/**
 * ROLE=worker: takes the runs the API replicas hand over, each run through this service's registry with the id, the
 * caller and the slot it was admitted with; tells the replica that handed it over once its agent started (the run is
 * stored by then), or what refused it.
 */
export const workersPlugin = fp<WorkersOptions>(async (app, { fleet, name, concurrency, places }) => {
  const { RunWorkers } = await import('../fleet/run-jobs.js')
  const workers = new RunWorkers({ ...fleet, name }, concurrency, async (tool, runId, data, report) => {
    const { kind, params, caller, createdAt, slot, context, push } = data as HandedRun
    const launched = app.runs.launch({
      kind: kind ?? 'async',
      tool: tool as ToolName,
      params,
      caller,
      log: app.log,
      context,
      push,
      handedOver: { id: runId, createdAt, slot }
    })
    try {
      await launched.accepted()
    } catch (error) {
      const refusal: WorkerAnswer = error instanceof ServiceError
        ? { refused: { code: error.code, message: error.message } }
        : { refused: { code: 'INTERNAL_ERROR', message: 'Internal server error' } }
      if (!(error instanceof ServiceError)) app.log.error({ err: error, run: runId }, 'a handed-over run failed')
      return refusal
    }
    await report({ started: true })
    // Its end stored before the replica that handed it over hears it ended, and reads it.
    await launched.settled()
    return { ended: true }
  }, places)
  await workers.ready()
  // After the runs' own shutdown (preClose): each run taken is stopped there, and its handler returns.
  app.addHook('onClose', async () => { await workers.close() })
}, { name: 'workers', dependencies: ['runs'] })

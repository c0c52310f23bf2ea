import t from 'tap'
import { launchElsewhere, type HandOverDeps, type WorkerAnswer } from '#src/runs/hand-over.js'
import { Run } from '#src/runs/run.js'
import { ServiceError } from '#src/errors.js'
import type { SlotLease } from '#src/slots/limiter.js'

// A run handed to the fleet (src/runs/hand-over.ts) against a fleet that does what BullMQ does: a worker may take a
// run and give it back (no room for it there), and only a run no worker has can be taken back.

/** A fleet whose one run is held by a worker until `giveBack()`; what it was handed, and its slot's end. */
function fleetHoldingIt() {
  let held = true
  let givenBack: () => void = () => undefined
  const handed: unknown[] = []
  const lease = { released: false, handedOff: false }
  const deps: HandOverDeps = {
    fleet: {
      handOver: async (_tool, _id, run) => {
        handed.push(run)
        return {
          answer: new Promise<WorkerAnswer | { lost: true }>(() => undefined),
          ended: new Promise<void>(() => undefined),
          withdraw: async () => !held,
          onGivenBack: (listener) => { givenBack = listener }
        }
      }
    },
    slotFor: async (): Promise<SlotLease> => ({
      holder: 'slot-1',
      release: () => { lease.released = true },
      handOff: () => { lease.handedOff = true }
    }),
    flushed: async () => undefined,
    takeWithinMs: 3_600_000,
    inWsl: async (_tool, params) => params.wsl_distro !== undefined
  }
  return {
    deps,
    handed,
    lease,
    giveBack: () => {
      held = false
      givenBack()
    }
  }
}

/** Once the run is in the fleet's hands. */
async function handedOver(fleet: { handed: unknown[] }): Promise<void> {
  while (fleet.handed.length === 0) await new Promise((resolve) => setImmediate(resolve))
}

t.test('stopped while a worker holds it: taken back as soon as that worker gives it back, never left to wait',
  async (t) => {
    const fleet = fleetHoldingIt()
    const run = new Run({ kind: 'async', tool: 'crush_run', caller: 'alice', params: { task: 'x', timeout: 60 } })
    const launched = launchElsewhere(run, { task: 'x', timeout: 60 }, fleet.deps)
    await handedOver(fleet)
    run.stop('cancelled')
    // Its worker still holds it: the stop's withdrawal is refused, and the run waits for that worker.
    await new Promise((resolve) => setImmediate(resolve))
    fleet.giveBack()
    const refusal = await launched.then(() => undefined, (error: unknown) => error)
    t.ok(refusal instanceof ServiceError, 'refused: it never started')
    t.match(refusal, { code: 'CLIENT_CLOSED_REQUEST' })
    t.same(fleet.lease, { released: true, handedOff: false }, 'its slot given back here')
  })

t.test('a run asking for a distro is handed over as a WSL run', async (t) => {
  const fleet = fleetHoldingIt()
  const params = { task: 'x', timeout: 60, wsl_distro: 'Ubuntu' }
  const run = new Run({ kind: 'async', tool: 'crush_run', caller: 'alice', params })
  const launched = launchElsewhere(run, params, fleet.deps).catch(() => undefined)
  await handedOver(fleet)
  t.match(fleet.handed, [{ wsl: true }])
  run.stop('cancelled')
  fleet.giveBack()
  await launched
})

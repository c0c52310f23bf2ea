import type { FastifyBaseLogger } from 'fastify'
import fp from 'fastify-plugin'
import { MemorySlotLimiter, type SlotLimiter } from '../slots/limiter.js'
import { SlotQueue } from '../slots/queue.js'
import type { FleetQueuedCounts } from '../fleet/queued-counts.js'

export interface SlotsOptions {
  /** Each tool's MAX_<AGENT>_AGENTS. */
  limits: Record<string, number>
  /** Each tool's MAX_QUEUED_<AGENT>. */
  maxQueued: Record<string, number>
  /** With slots in Redis: the prefix of the fleet's keys, where each replica says how many runs wait on it. */
  fleetPrefix?: string | undefined
  backend:
    | { backend: 'memory' }
    | { backend: 'redis'; url: string; ttlMs: number; keyPrefix: string; timeoutMs: number }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Who holds a slot of each tool (this process's, or the fleet's in Redis). */
    slots: SlotLimiter
    /** Runs waiting for a slot of their tool, first come first served. */
    slotQueue: SlotQueue
    /** How many runs of a tool wait for a slot: on every replica sharing the slots, or here. */
    queuedRuns: (tool: string) => Promise<number>
  }
}

/** The slots SLOTS_BACKEND names, closed with the service. */
export const slotsPlugin = fp<SlotsOptions>(async (app, { limits, maxQueued, backend, fleetPrefix }) => {
  app.decorate('slots', await slotLimiter(limits, backend, app.log))
  app.addHook('onClose', async () => { await app.slots.close() })
  const fleet = await fleetQueuedCounts(backend, fleetPrefix, app.log)
  if (fleet === undefined) {
    app.decorate('slotQueue', new SlotQueue(app.slots, maxQueued))
    app.decorate('queuedRuns', async (tool: string) => app.slotQueue.queued(tool))
    return
  }
  app.addHook('onClose', async () => { await fleet.close() })
  const onQueued = (tool: string, queued: number): void => { fleet.set(tool, queued) }
  app.decorate('slotQueue', new SlotQueue(app.slots, maxQueued, { onQueued }))
  app.decorate('queuedRuns', (tool: string) => fleet.total(tool))
}, { name: 'slots' })

async function slotLimiter(
  limits: Record<string, number>,
  backend: SlotsOptions['backend'],
  log: FastifyBaseLogger
): Promise<SlotLimiter> {
  if (backend.backend === 'memory') return new MemorySlotLimiter(limits)
  // ioredis and redis-semaphore are a third of the modules the service would load at start: only a fleet pays for them.
  const { RedisSlotLimiter } = await import('../slots/redis-limiter.js')
  const { url, ttlMs, keyPrefix, timeoutMs } = backend
  return new RedisSlotLimiter(limits, { url, ttlMs, keyPrefix, timeoutMs, log })
}

/** With slots shared in Redis, runs wait on every replica that admits them: the fleet's count is all of theirs. */
async function fleetQueuedCounts(
  backend: SlotsOptions['backend'], prefix: string | undefined, log: FastifyBaseLogger
): Promise<FleetQueuedCounts | undefined> {
  if (backend.backend === 'memory' || prefix === undefined) return undefined
  const { FleetQueuedCounts } = await import('../fleet/queued-counts.js')
  const { url, ttlMs, timeoutMs } = backend
  return new FleetQueuedCounts({ url, prefix, ttlMs, timeoutMs, log })
}

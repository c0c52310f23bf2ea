import type { FastifyBaseLogger } from 'fastify'
import fp from 'fastify-plugin'
import { MemorySlotLimiter, type SlotLimiter } from '../slots/limiter.js'
import { SlotQueue } from '../slots/queue.js'

export interface SlotsOptions {
  /** Each tool's MAX_<AGENT>_AGENTS. */
  limits: Record<string, number>
  /** Each tool's MAX_QUEUED_<AGENT>. */
  maxQueued: Record<string, number>
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
  }
}

/** The slots SLOTS_BACKEND names, closed with the service. */
export const slotsPlugin = fp<SlotsOptions>(async (app, { limits, maxQueued, backend }) => {
  app.decorate('slots', await slotLimiter(limits, backend, app.log))
  app.decorate('slotQueue', new SlotQueue(app.slots, maxQueued))
  app.addHook('onClose', async () => { await app.slots.close() })
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

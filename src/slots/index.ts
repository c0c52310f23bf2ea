import type { FastifyBaseLogger } from 'fastify'
import { toolNameOf } from '../agents/spec.js'
import type { Config } from '../config.js'
import { MemorySlotLimiter, type SlotLimiter } from './limiter.js'

export async function createSlotLimiter(config: Config, log: FastifyBaseLogger): Promise<SlotLimiter> {
  const limits = Object.fromEntries(config.agents.map(({ spec, settings }) => [toolNameOf(spec), settings.maxAgents]))
  if (config.slots.backend === 'memory') return new MemorySlotLimiter(limits)
  // ioredis and redis-semaphore are a third of the modules the service would load at start: only a fleet pays for them.
  const { RedisSlotLimiter } = await import('./redis-limiter.js')
  const { url, ttlMs, keyPrefix, timeoutMs } = config.slots
  return new RedisSlotLimiter(limits, { url, ttlMs, keyPrefix, timeoutMs, log })
}

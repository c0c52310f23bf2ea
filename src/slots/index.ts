import type { FastifyBaseLogger } from 'fastify'
import { toolNameOf } from '../agents/spec.js'
import type { Config } from '../config.js'
import { MemorySlotLimiter, type SlotLimiter } from './limiter.js'
import { RedisSlotLimiter } from './redis-limiter.js'

export function createSlotLimiter(config: Config, log: FastifyBaseLogger): SlotLimiter {
  const limits = Object.fromEntries(config.agents.map(({ spec, settings }) => [toolNameOf(spec), settings.maxAgents]))
  if (config.slots.backend === 'memory') return new MemorySlotLimiter(limits)
  const { url, ttlMs, keyPrefix } = config.slots
  return new RedisSlotLimiter(limits, { url, ttlMs, keyPrefix, log })
}

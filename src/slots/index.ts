import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../config.js'
import { MemorySlotLimiter, type SlotLimiter } from './limiter.js'
import { RedisSlotLimiter } from './redis-limiter.js'

export function createSlotLimiter(config: Config, log: FastifyBaseLogger): SlotLimiter {
  const limits = { crush_run: config.crush.maxAgents, claude_run: config.claude.maxAgents }
  if (config.slots.backend === 'memory') return new MemorySlotLimiter(limits)
  const { url, ttlMs, keyPrefix } = config.slots
  return new RedisSlotLimiter(limits, { url, ttlMs, keyPrefix, log })
}

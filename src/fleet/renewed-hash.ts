import type { Static, TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import type { Redis } from 'ioredis'

/**
 * The entries of a hash each member of the fleet renews, as a reader keeps them: those of the expected shape seen
 * within the TTL. What another process wrote is checked, not trusted (another version may have written it); the rest
 * (a member killed, its host away) is struck off as found.
 */
export async function freshEntries<S extends TSchema>(
  redis: Redis, key: string, ttlMs: number, shape: S, seenAt: (entry: Static<S>) => number, now = Date.now()
): Promise<Array<Static<S>>> {
  const fresh: Array<Static<S>> = []
  const gone: string[] = []
  for (const [field, text] of Object.entries(await redis.hgetall(key))) {
    const entry = parsed(text)
    if (Value.Check(shape, entry) && now - seenAt(entry) <= ttlMs) fresh.push(entry)
    else gone.push(field)
  }
  if (gone.length > 0) await redis.hdel(key, ...gone)
  return fresh
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

import type { A2ARequestHandler } from '@a2a-js/sdk/server'
import type { FastifyBaseLogger } from 'fastify'
import { answerable } from './errors.js'

/** What the handler’s failures are told to: the log (what nobody meant), the count of refusals (what was said). */
export interface FailureObservers {
  log: FastifyBaseLogger
  /** A refusal of the service's, by its code (as REST's and MCP's are counted). */
  refused: (code: string) => void
}

const isStream = (value: unknown): value is AsyncGenerator =>
  typeof (value as AsyncGenerator | null)?.[Symbol.asyncIterator] === 'function'

function told(error: unknown, observers: FailureObservers): unknown {
  const answer = answerable(error, observers.log)
  const code = (answer as { metadata?: Record<string, string> }).metadata?.['code']
  if (code !== undefined) observers.refused(code)
  return answer
}

async function* guardedStream<T>(stream: AsyncGenerator<T>, observers: FailureObservers): AsyncGenerator<T> {
  try {
    yield* stream
  } catch (error) {
    throw told(error, observers)
  }
}

/**
 * The handler as the SDK's transports call it: whatever fails in it (before a stream or during one) leaves as an A2A
 * error a client may read, the service's refusals with their codes (and counted), anything unexpected as an internal
 * error whose details stay in the log (the transports would otherwise answer with its message).
 */
export function guarded(handler: A2ARequestHandler, observers: FailureObservers): A2ARequestHandler {
  return new Proxy(handler, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target)
      if (typeof value !== 'function') return value
      return (...args: unknown[]) => {
        const result: unknown = value.apply(target, args)
        if (isStream(result)) return guardedStream(result, observers)
        return result instanceof Promise ? result.catch((error: unknown) => { throw told(error, observers) }) : result
      }
    }
  })
}

import type { A2ARequestHandler } from '@a2a-js/sdk/server'
import type { FastifyBaseLogger } from 'fastify'
import { answerable } from './errors.js'

const isStream = (value: unknown): value is AsyncGenerator =>
  typeof (value as AsyncGenerator | null)?.[Symbol.asyncIterator] === 'function'

async function* guardedStream<T>(stream: AsyncGenerator<T>, log: FastifyBaseLogger): AsyncGenerator<T> {
  try {
    yield* stream
  } catch (error) {
    throw answerable(error, log)
  }
}

/**
 * The handler as the SDK's transports call it: whatever fails in it (before a stream or during one) leaves as an A2A
 * error a client may read, the service's refusals with their codes, anything unexpected as an internal error whose
 * details stay in the log (the transports would otherwise answer with its message).
 */
export function guarded(handler: A2ARequestHandler, log: FastifyBaseLogger): A2ARequestHandler {
  return new Proxy(handler, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target)
      if (typeof value !== 'function') return value
      return (...args: unknown[]) => {
        const result: unknown = value.apply(target, args)
        if (isStream(result)) return guardedStream(result, log)
        return result instanceof Promise ? result.catch((error: unknown) => { throw answerable(error, log) }) : result
      }
    }
  })
}

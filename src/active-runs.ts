import type { FastifyReply } from 'fastify'
import type { StopReason } from './schemas/run.js'

/**
 * The runs in flight, so that shutdown can stop them all and a client that leaves stops its own. Each run gets an
 * AbortSignal whose reason says who stopped it.
 */
export class ActiveRuns {
  readonly #controllers = new Set<AbortController>()

  get size(): number {
    return this.#controllers.size
  }

  /**
   * Watches the reply's connection: closed before the response is written means the client is gone. Begin before any
   * await, so that no moment between the body and the agent's start goes unwatched.
   */
  begin(reply: FastifyReply): { signal: AbortSignal; abort: (reason: StopReason) => void; end: () => void } {
    const controller = new AbortController()
    this.#controllers.add(controller)
    const onClose = (): void => {
      if (!reply.raw.writableEnded) controller.abort('client_gone' satisfies StopReason)
    }
    reply.raw.once('close', onClose)
    // The connection may have closed already, while the body was checked or a slot awaited: the close was missed.
    if (reply.request.raw.socket?.destroyed === true) onClose()
    return {
      signal: controller.signal,
      abort: (reason) => controller.abort(reason),
      end: () => {
        reply.raw.off('close', onClose)
        this.#controllers.delete(controller)
      }
    }
  }

  stopAll(reason: StopReason): void {
    for (const controller of this.#controllers) controller.abort(reason)
  }
}

import type { Socket } from 'node:net'
import type { FastifyReply } from 'fastify'
import type { Run } from '../../runs/run.js'

/**
 * Stops a run whose client leaves: its connection closed before the response was written. Call before any await, so
 * that no moment between the body and the agent's start goes unwatched. Returns the function that stops watching.
 */
export function stopWhenClientLeaves(reply: FastifyReply, run: Run): () => void {
  const onClose = (): void => {
    if (!reply.raw.writableEnded) run.stop('client_gone')
  }
  reply.raw.once('close', onClose)
  // The connection may have closed already, while the body was checked: the close was missed. Node nulls a request's
  // socket once it is detached, whatever its type says.
  const socket = reply.request.raw.socket as Socket | null
  if (socket?.destroyed === true) onClose()
  return () => reply.raw.off('close', onClose)
}

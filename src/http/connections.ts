import type { FastifyInstance } from 'fastify'
import type { Socket } from 'node:net'

/**
 * Lets a closing server finish promptly. Node's server.close() waits for every connection, and closes by itself only
 * keep-alive connections between requests — not one that never sent a request (a client's or a proxy's spare), which
 * would then hold the shutdown until headersTimeout. So: at close, connections with no request in flight are dropped,
 * and each answer sent while closing ends its connection.
 */
export function closeConnectionsWhenIdle(app: FastifyInstance): void {
  const requestsInFlight = new Map<Socket, number>()
  let closing = false

  app.server.on('connection', (socket: Socket) => {
    requestsInFlight.set(socket, 0)
    socket.once('close', () => requestsInFlight.delete(socket))
  })
  app.addHook('onRequest', async (request, reply) => {
    const socket = request.raw.socket
    // Only connections the server accepted: injected requests (tests) have no real socket.
    if (!requestsInFlight.has(socket)) return
    requestsInFlight.set(socket, requestsInFlight.get(socket)! + 1)
    // 'close' of the response, not onResponse: a hijacked (streaming) reply never reaches onResponse.
    reply.raw.once('close', () => {
      const left = requestsInFlight.get(socket)
      if (left === undefined) return
      requestsInFlight.set(socket, left - 1)
      if (closing && left === 1) socket.destroy()
    })
  })
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close')
  })
  app.addHook('preClose', async () => {
    closing = true
    for (const [socket, count] of requestsInFlight) if (count === 0) socket.destroy()
  })
}

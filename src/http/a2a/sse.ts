import { SSE_HEADERS } from '@a2a-js/sdk'
import type { FastifyReply } from 'fastify'

/** An event's SSE frame: its id line when it has one (a step's, for Last-Event-ID), and its JSON. */
export const sseFrame = (json: unknown, eventId?: string): string =>
  `${eventId === undefined ? '' : `id: ${eventId}\n`}data: ${JSON.stringify(json)}\n\n`

/**
 * A stream's events as server-sent events, each written once the client has taken the one before (a client that does
 * not read holds the task's follower still, never a growing buffer), a heartbeat comment while the task is quiet, and
 * an error that comes mid-stream as its last frame. Ends once the events end or the client leaves.
 */
export async function writeSse<T>(
  reply: FastifyReply,
  first: T | undefined,
  rest: AsyncGenerator<T>,
  frames: { of: (event: T) => string; ofError: (error: unknown) => string },
  heartbeatMs: number,
  gone: AbortSignal
): Promise<void> {
  reply.hijack()
  const raw = reply.raw
  raw.writeHead(200, { ...reply.getHeaders(), ...SSE_HEADERS } as Record<string, string>)
  let heartbeat: NodeJS.Timeout | undefined
  const write = async (text: string): Promise<void> => {
    clearTimeout(heartbeat)
    if (raw.destroyed) return
    heartbeat = setTimeout(() => void write(': heartbeat\n\n'), heartbeatMs)
    if (!raw.write(text)) await new Promise((resolve) => { raw.once('drain', resolve); raw.once('close', resolve) })
  }
  try {
    if (first !== undefined) await write(frames.of(first))
    for (let next = await rest.next(); next.done !== true && !gone.aborted; next = await rest.next()) {
      await write(frames.of(next.value))
    }
  } catch (error) {
    await write(frames.ofError(error))
  } finally {
    clearTimeout(heartbeat)
    await rest.return(undefined)
    raw.end()
  }
}

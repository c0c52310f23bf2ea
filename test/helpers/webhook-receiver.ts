import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'

/** One request a receiver got: its headers, its raw body, its path. */
export interface Received {
  headers: IncomingMessage['headers']
  body: string
  url: string
}

/**
 * A webhook receiver on loopback (the only address tests may send to), closed when the test ends. `answer` is given
 * each request once its body is read, and how many came before it; it returns the status to answer with, null to
 * never answer, or a function that writes the answer itself.
 */
export async function webhookReceiver(
  t: Test,
  answer: (request: Received, index: number) => number | null | ((response: ServerResponse) => void)
): Promise<{ url: string; received: Received[]; server: Server }> {
  const received: Received[] = []
  const server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const got = { headers: request.headers, body: Buffer.concat(chunks).toString(), url: request.url ?? '' }
      const answered = answer(got, received.length)
      received.push(got)
      if (typeof answered === 'function') answered(response)
      else if (answered !== null) response.writeHead(answered).end()
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${String(port)}/hooks`, received, server }
}

/** The status of `statuses` for the request at `index`, the last one repeated. */
export const nthOf = (statuses: readonly number[]) => (_request: Received, index: number): number =>
  statuses[Math.min(index, statuses.length - 1)]!

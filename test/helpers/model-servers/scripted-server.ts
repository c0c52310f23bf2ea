import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * One answer of a scripted model: call the CLI's own shell tool with a command the test chose, or end the turn with
 * text. A script is the list of answers, in order. `held`: a model that never gives this answer (the request stays
 * open until the CLI leaves), so a CLI that is to be stopped on the turn before waits for that stop, however slow the
 * machine and however quick the CLI.
 */
export type ModelTurn = { run: string } | { say: string, held?: boolean }

export interface RecordedRequest {
  method: string
  /** The path with its query string, as the CLI sent it. */
  url: string
  headers: IncomingHttpHeaders
  /** The parsed JSON body (undefined when there was none or it was not JSON). */
  body: unknown
}

/**
 * What one wire protocol knows: how to answer a request from the script, and how to read the tool results the CLI
 * sent back. Which answer is due is derived from the request itself (how many tool results its conversation already
 * holds), never from a counter, so a CLI's retries and side requests (titles, summaries, quota checks) cannot shift
 * the script.
 */
export interface WireProtocol {
  /** Answers the request: a scripted turn, a harmless reply to a side request, or a 404 for what it does not know. */
  answer: (request: RecordedRequest, turns: readonly ModelTurn[], res: ServerResponse) => void
  /**
   * The text of each tool result in the request's conversation, in order (what the tool printed, as the CLI put
   * it).
   */
  toolResults: (body: unknown) => string[]
  /**
   * The conversation the request gives the model (its messages, contents or input items, in order) when it is the
   * main one, offering the shell tool; null for a side request (title, summary, check) that only needs some answer.
   */
  conversation: (body: unknown) => unknown[] | null
}

export interface ScriptedModelServer {
  /** The base URL to point the CLI at (no trailing slash). */
  url: string
  /** Every request received, in order. */
  requests: RecordedRequest[]
  /** The tool results in the most complete conversation received so far: what the CLI reported back to the model. */
  toolResults: () => string[]
  /** The conversation of each main request (see WireProtocol.conversation) from request number `since` on, in order. */
  conversations: (since?: number) => unknown[][]
  /**
   * Follows `turns` from the next request on. The due turn is still the one at the count of tool results in the
   * conversation, and a continued conversation holds the earlier runs' results: its script goes on from that count.
   */
  rescript: (turns: readonly ModelTurn[]) => void
  close: () => Promise<void>
}

/** The scripted turn due for a conversation that already holds `toolResultCount` tool results; the last one repeats. */
export function turnFor(turns: readonly ModelTurn[], toolResultCount: number): ModelTurn {
  return turns[Math.min(toolResultCount, turns.length - 1)] ?? { say: 'done' }
}

/** Writes one Server-Sent Event; `event` is left out when the protocol uses only `data:` lines. */
export function writeSse(res: ServerResponse, data: unknown, event?: string): void {
  res.write(`${event === undefined ? '' : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`)
}

export function startSse(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const text = Buffer.concat(chunks).toString('utf8')
  if (text === '') return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** Whether the main conversation's due turn is one the model never gives (side requests: always answered). */
function withheld(protocol: WireProtocol, turns: readonly ModelTurn[], body: unknown): boolean {
  if (protocol.conversation(body) === null) return false
  const turn = turnFor(turns, protocol.toolResults(body).length)
  return 'held' in turn && turn.held === true
}

/** A dependency-free model server on loopback that follows the script, speaking one wire protocol. */
export async function startScriptedServer(
  protocol: WireProtocol, turns: readonly ModelTurn[]
): Promise<ScriptedModelServer> {
  const requests: RecordedRequest[] = []
  let script = turns
  const server = createServer((req, res) => {
    readBody(req).then((body) => {
      const request: RecordedRequest = { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers, body }
      requests.push(request)
      // Left open: the CLI leaving, or the server closing, ends it.
      if (withheld(protocol, script, body)) return
      protocol.answer(request, script, res)
    }).catch((error: unknown) => { sendJson(res, 500, { error: String(error) }) })
  })
  // A CLI keeps its connections alive; closing must not wait for them.
  server.keepAliveTimeout = 1000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    toolResults: () => requests.map((request) => protocol.toolResults(request.body)).reduce(
      (longest, results) => results.length > longest.length ? results : longest, []
    ),
    conversations: (since = 0) => requests.slice(since).map((request) => protocol.conversation(request.body))
      .filter((conversation): conversation is unknown[] => conversation !== null),
    rescript: (next) => { script = next },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => { resolve() })
    })
  }
}

import type { FastifyPluginAsync } from 'fastify'
import type { Server } from '@modelcontextprotocol/sdk/server/index.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import type { ToolName } from '../../agents/catalog.js'
import type { AgentTool } from '../../agents/tools.js'
import type { RunRegistry } from '../../runs/registry.js'
import type { Run } from '../../runs/run.js'
import { serviceError, ServiceError } from '../../errors.js'
import { toErrorResponse, type RejectionObserver } from '../error-handler.js'
import type { ErrorResponse } from '../../schemas/error.js'
import { errorResponses } from '../../schemas/shared.js'
import { PendingProgress, PROGRESS_EVERY_MS, PROGRESS_PENDING_BYTES } from './progress.js'
import { mcpToolsOf } from './tools.js'
import { paramsOf } from '../run-params.js'
import { stepLine } from '../step-line.js'

interface McpRouteOptions {
  tools: Record<ToolName, AgentTool>
  runs: RunRegistry
  version: string
  /** A refused call counts as a refused REST request does (metrics). */
  onRejection: RejectionObserver
}

/**
 * The SDK (zod and its schemas with it) costs more start time and memory than the rest of the service: it is loaded
 * by the first MCP request, once.
 */
let sdk: Promise<Sdk> | undefined
type Sdk = Awaited<ReturnType<typeof importSdk>>
async function importSdk() {
  const [
    { Server },
    { StreamableHTTPServerTransport },
    { CallToolRequestSchema, ListToolsRequestSchema }
  ] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/index.js'),
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js')
  ])
  return { Server, StreamableHTTPServerTransport, CallToolRequestSchema, ListToolsRequestSchema }
}

/** A refused call: the REST error object, as structured content a program branches on and as text people read. */
function toolError(answer: ErrorResponse): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: answer.message }], structuredContent: { ...answer } }
}

/** A call in flight, as a later `notifications/cancelled` names it: its caller's token and its JSON-RPC id. */
const callKey = (caller: string, requestId: unknown): string => `${caller}\u0000${String(requestId)}`

interface CancelledNotification {
  method?: unknown
  params?: { requestId?: unknown, reason?: unknown }
}

/** The `notifications/cancelled` of a POST, alone or in a batch. */
function cancellations(body: unknown): CancelledNotification[] {
  // Any JSON may come: null among them.
  const messages = (Array.isArray(body) ? body : [body]) as Array<CancelledNotification | null>
  return messages.filter((message) => message?.method === 'notifications/cancelled') as CancelledNotification[]
}

/** One POST's JSON-RPC exchange, as the calls in it need it. */
interface Exchange {
  caller: string
  /** The calls' runs, stopped if the client leaves before its answer. */
  runs: Set<Run>
  transport: Transport
  /** What was written to the client is still in the socket's buffer, more than a notification or two. */
  clientBehind: () => boolean
  /** Ends the response with no answer in it: the call was cancelled. */
  endUnanswered: () => void
}

interface CallInFlight {
  run: Run
  /** Where a cancellation that came in another POST is handed, for the SDK to drop the call's answer. */
  transport: Transport
}

/**
 * The agents as MCP tools, on the Streamable HTTP transport in stateless mode: each POST is one JSON-RPC exchange with
 * a fresh server, so any replica answers any call and nothing outlives its request. A call is a synchronous run, on the
 * same slots, containment and deadline as POST /tools/{tool}; stopping it (notifications/cancelled, or the connection
 * closing) stops its agent.
 */
const mcpRoute: FastifyPluginAsync<McpRouteOptions> = async (app, options) => {
  const { tools, runs: registry, version, onRejection } = options
  // Stateless: the cancellation of a call arrives in another POST, to another server instance, so calls in flight are
  // found here by who asked and the request's id.
  const inFlight = new Map<string, Set<CallInFlight>>()
  const listed = mcpToolsOf(Object.values(tools))

  /** Counted and logged as a refused REST request is, and answered with the REST error object. */
  const refuse = (toolName: string, error: ServiceError): CallToolResult => {
    const answer = toErrorResponse(error)
    // An unexpected failure's details stay in the log, as they do for REST.
    if (answer.code === 'INTERNAL_ERROR') app.log.error({ err: error }, 'MCP call failed')
    onRejection(toolName, answer.code)
    return toolError(answer)
  }

  const serverFor = ({ Server, CallToolRequestSchema, ListToolsRequestSchema }: Sdk, exchange: Exchange): Server => {
    const { caller, runs } = exchange
    const server = new Server({ name: 'agent-runner', version }, { capabilities: { tools: {} } })
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: listed }))
    server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
      // Own names only: `constructor` or `__proto__` are not tools.
      const tool = Object.hasOwn(tools, request.params.name) ? tools[request.params.name as ToolName] : undefined
      if (tool === undefined) {
        return refuse('unknown', serviceError('VALIDATION_ERROR', `Unknown tool: ${request.params.name}`))
      }
      const params = paramsOf(request.params.arguments)
      if (params instanceof ServiceError) return refuse(tool.name, params)
      const { run, result: ended } = registry.launch({ kind: 'sync', tool: tool.name, params, caller, log: app.log })
      const key = callKey(caller, extra.requestId)
      // A caller reusing an id in flight: its cancellation reaches every call of that id, none is left unreachable.
      const call: CallInFlight = { run, transport: exchange.transport }
      const sameId = inFlight.get(key) ?? new Set<CallInFlight>()
      inFlight.set(key, sameId.add(call))
      runs.add(run)
      const progressToken = request.params._meta?.progressToken
      // Progress is read by people: what the agent does, when it says so, rather than its raw JSON lines.
      const choice = params.events ?? (tool.reportsActions ? 'steps' : 'output')
      const pending = new PendingProgress()
      let sent = 0
      let timer: NodeJS.Timeout | undefined
      const flush = async (final = false): Promise<void> => {
        timer = undefined
        if (pending.empty || progressToken === undefined) return
        // A client that does not read gets nothing more until it does: the output waits, bounded, for the next turn.
        if (exchange.clientBehind() && !final) {
          timer = setTimeout(() => void flush(), PROGRESS_EVERY_MS)
          return
        }
        const message = pending.take()
        try {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken, progress: ++sent, message }
          })
        } catch {
          // The client is gone: its run stops with its connection.
        }
      }
      try {
        const progress = (chunk: Buffer): void => {
          pending.push(chunk)
          timer ??= setTimeout(() => void flush(), PROGRESS_EVERY_MS)
        }
        if (progressToken !== undefined) {
          // Followed live either way: the agent writes its structured output, which its steps are read from.
          run.on('output', (chunk) => { if (choice !== 'steps') progress(chunk) })
          if (choice !== 'output') run.on('step', (step) => progress(Buffer.from(`${stepLine(step)}\n`)))
          run.on('queued', (position) => progress(Buffer.from(`queued: waiting for a slot, position ${position}\n`)))
        }
        const result = await ended
        clearTimeout(timer)
        // Cancelled: MCP sends no answer to a cancelled request (the SDK drops what this returns); its stream ends.
        if (extra.signal.aborted) exchange.endUnanswered()
        else await flush(true)
        return { content: [{ type: 'text', text: result.output }], structuredContent: result, isError: !result.ok }
      } catch (error) {
        clearTimeout(timer)
        // Cancelled before its agent started (it waited for a slot): no answer either, and its stream ends.
        if (extra.signal.aborted) exchange.endUnanswered()
        return refuse(tool.name, error as ServiceError)
      } finally {
        sameId.delete(call)
        if (sameId.size === 0 && inFlight.get(key) === sameId) inFlight.delete(key)
        runs.delete(run)
      }
    })
    return server
  }

  app.post(
    '/mcp',
    {
      schema: {
        operationId: 'mcp',
        tags: ['mcp'],
        summary: 'The agents as Model Context Protocol tools (Streamable HTTP, stateless)',
        description:
          'JSON-RPC 2.0 per the Model Context Protocol (Streamable HTTP transport, no sessions): `tools/list` gives ' +
          'one tool per agent, `tools/call` runs it as POST /tools/{tool} would, on the same slots. Same bearer ' +
          'token and Host/Origin rules as /tools. The MCP specification is this endpoint’s contract.',
        body: { description: 'A JSON-RPC request or notification (or a batch of them).' },
        response: {
          200: {
            description:
              'The JSON-RPC response, as JSON or as an SSE stream (progress notifications, then the result).',
            content: {
              'application/json': { schema: { type: 'object' } },
              'text/event-stream': { schema: { type: 'string' } }
            }
          },
          202: { description: 'A notification (or response) accepted; nothing to answer.', type: 'null' },
          ...errorResponses([401, 403, 413, 415]),
          400: {
            description:
              'Not a JSON-RPC message the transport accepts: a JSON-RPC error object (the error shape of this API ' +
              'when the body is not JSON at all).',
            content: { 'application/json': { schema: { type: 'object' } } }
          }
        }
      }
    },
    async (request, reply) => {
      for (const cancellation of cancellations(request.body)) {
        const { requestId, reason } = cancellation.params ?? {}
        for (const { run, transport } of inFlight.get(callKey(request.caller, requestId)) ?? []) {
          run.stop('cancelled')
          // Its own server aborts the call as if the notification had come in its POST, and sends no answer.
          transport.onmessage?.({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason } })
        }
      }
      const runs = new Set<Run>()
      const loaded = await (sdk ??= importSdk())
      const transport = new loaded.StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
      const server = serverFor(loaded, {
        caller: request.caller,
        runs,
        transport,
        clientBehind: () => reply.raw.writableLength > PROGRESS_PENDING_BYTES,
        endUnanswered: () => reply.raw.end()
      })
      reply.hijack()
      reply.raw.on('close', () => {
        // The client left before its answer: its calls' agents stop, as a REST client's do.
        if (!reply.raw.writableEnded) for (const run of runs) run.stop('client_gone')
        void transport.close()
        void server.close()
      })
      await server.connect(transport)
      await transport.handleRequest(request.raw, reply.raw, request.body)
    }
  )

  // Streamable HTTP lets a server answer 405 to GET (a stream of server-initiated messages) and to DELETE (ending a
  // session): a stateless endpoint offers neither, and says so rather than 404.
  const notOffered = [
    ['GET', 'mcpStream', 'No server-initiated stream here: MCP over POST only', 'a stream of server messages'],
    ['DELETE', 'mcpEndSession', 'No session to end here: MCP over POST only', 'ending a session']
  ] as const
  for (const [method, operationId, summary, what] of notOffered) {
    const description =
      `What MCP's Streamable HTTP transport uses ${method} for (${what}) does not exist on this stateless endpoint: ` +
      'always 405 `METHOD_NOT_ALLOWED`, with `Allow: POST`.'
    app.route({
      method,
      url: '/mcp',
      schema: { operationId, tags: ['mcp'], summary, description, response: errorResponses([401, 403, 405]) },
      handler: async (_request, reply) => {
        void reply.header('allow', 'POST')
        throw serviceError('METHOD_NOT_ALLOWED', method)
      }
    })
  }
}

export default mcpRoute

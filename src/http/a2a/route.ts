import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import type { ToolName } from '../../agents/catalog.js'
import type { AgentTool } from '../../agents/tools.js'
import { parseEventId } from '../../runs/event-log.js'
import type { RunRegistry } from '../../runs/registry.js'
import { agentPath, type CardSite } from './cards.js'
import type * as Protocol from './protocol.js'

interface A2aOptions {
  tools: Record<ToolName, AgentTool>
  runs: RunRegistry
  version: string
  publicUrl: string | undefined
  secured: boolean
  heartbeatMs: number
}

/**
 * The SDK, and the modules that speak through it, are loaded by the first A2A request, once: a service nobody
 * reaches over A2A pays nothing for it at start.
 */
let protocol: Promise<typeof Protocol> | undefined
const loadProtocol = () => (protocol ??= import('./protocol.js'))

const siteOf = (options: A2aOptions, request: FastifyRequest): CardSite => ({
  baseUrl: options.publicUrl ?? `${request.protocol}://${request.host}`,
  secured: options.secured,
  version: options.version
})

/** Which agent a path names: a tool's, or the service's (undefined). */
const agents = (tools: Record<ToolName, AgentTool>): Array<AgentTool | undefined> =>
  [undefined, ...Object.values(tools)]

/**
 * The agent cards: public, as discovery is (they name what runs here and how to authenticate, nothing of anyone's
 * runs). The service's card is also at the root's well-known path, where A2A clients look first.
 */
export const a2aCards: FastifyPluginAsync<A2aOptions> = async (app, options) => {
  const cardOf = async (tool: AgentTool | undefined, request: FastifyRequest): Promise<unknown> => {
    const { cardJson } = await loadProtocol()
    return cardJson(Object.values(options.tools), tool, siteOf(options, request))
  }
  const schema = { hide: true }
  app.get('/.well-known/agent-card.json', { schema }, (request) => cardOf(undefined, request))
  for (const tool of agents(options.tools)) {
    app.get(`${agentPath(tool?.name)}/.well-known/agent-card.json`, { schema }, (request) => cardOf(tool, request))
  }
}

/**
 * Each agent's A2A endpoint (JSON-RPC binding), behind the same token as the REST API: the caller is the token's
 * name, and a task is one of its runs.
 */
export const a2aRoutes: FastifyPluginAsync<A2aOptions> = async (app, options) => {
  // A2A's own media type is JSON as well.
  app.addContentTypeParser('application/a2a+json', { parseAs: 'string' }, app.getDefaultJsonParser('error', 'error'))
  for (const tool of agents(options.tools)) {
    app.post(agentPath(tool?.name), { schema: { hide: true } }, async (request, reply) => {
      const { answerJsonRpc } = await loadProtocol()
      await answerJsonRpc({
        request,
        reply,
        tool: tool?.name,
        toolNames: Object.keys(options.tools) as ToolName[],
        tools: Object.values(options.tools),
        runs: options.runs,
        site: siteOf(options, request),
        heartbeatMs: options.heartbeatMs,
        lastEventId: parseEventId(String(request.headers['last-event-id'] ?? '0'))
      })
      return reply
    })
  }
}

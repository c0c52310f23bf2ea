import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import type { ToolName } from '../../agents/catalog.js'
import type { AgentTool } from '../../agents/tools.js'
import { parseEventId } from '../../runs/event-log.js'
import type { RunRegistry } from '../../runs/registry.js'
import type { RejectionObserver } from '../error-handler.js'
import type { A2aCall } from './call.js'
import { agentPath, type CardSite } from './cards.js'
import type { AgentOperation, ConfigOperation, HttpJsonOperation, TaskOperation } from './http-json.js'
import type * as Protocol from './protocol.js'

interface A2aOptions {
  tools: Record<ToolName, AgentTool>
  runs: RunRegistry
  version: string
  publicUrl: string | undefined
  secured: boolean
  heartbeatMs: number
  onRejection: RejectionObserver
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

const hidden = { schema: { hide: true } }

/**
 * The agent cards: public, as discovery is (they name what runs here and how to authenticate, nothing of anyone's
 * runs). The service's card is also at the root's well-known path, where A2A clients look first.
 */
export const a2aCards: FastifyPluginAsync<A2aOptions> = async (app, options) => {
  const cardOf = async (tool: AgentTool | undefined, request: FastifyRequest, reply: FastifyReply) => {
    const { cardJson } = await loadProtocol()
    // Without PUBLIC_URL the card names the Host it was asked by: no cache may give it to a client of another.
    if (options.publicUrl === undefined) void reply.header('cache-control', 'no-store').header('vary', 'host')
    return cardJson(Object.values(options.tools), tool, siteOf(options, request))
  }
  app.get('/.well-known/agent-card.json', hidden, (request, reply) => cardOf(undefined, request, reply))
  for (const tool of agents(options.tools)) {
    app.get(`${agentPath(tool?.name)}/.well-known/agent-card.json`, hidden,
      (request, reply) => cardOf(tool, request, reply))
  }
}

/** Text no JSON parser reads (rather than JSON refused for what it holds: a `__proto__` key). */
function isNoJson(text: string): boolean {
  try {
    JSON.parse(text)
    return false
  } catch {
    return true
  }
}

/** `<id>` or `<id>:<verb>`, as the HTTP+JSON binding names a task and what to do with it. */
function taskOperation(ref: string, verbs: Record<string, TaskOperation>): HttpJsonOperation | null {
  const colon = ref.indexOf(':')
  const name = verbs[colon === -1 ? '' : ref.slice(colon + 1)]
  return name === undefined ? null : { name, id: colon === -1 ? ref : ref.slice(0, colon) }
}

/**
 * Each agent's A2A endpoints, behind the same token as the REST API (the caller is the token's name, a task one of
 * its runs): JSON-RPC at the agent's path, HTTP+JSON's resources under it.
 */
export const a2aRoutes: FastifyPluginAsync<A2aOptions> = async (app, options) => {
  // A2A's own media type is JSON as well; HTTP+JSON clients send a JSON content type with no body where an operation
  // takes none (the SDK's cancel); and a body that is no JSON is the protocol's to refuse, in its own error (JSON-RPC's
  // transport parses the text itself), not the REST API's.
  const json = app.getDefaultJsonParser('error', 'error')
  app.removeContentTypeParser('application/json')
  const types = ['application/json', 'application/a2a+json']
  app.addContentTypeParser(types, { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined)
    const text = body as string
    void json(request, text, (error, parsed) => {
      if (error !== null && isNoJson(text)) return done(null, text)
      done(error, parsed)
    })
  })
  for (const tool of agents(options.tools)) {
    const path = agentPath(tool?.name)
    const callOf = (request: FastifyRequest, reply: FastifyReply): A2aCall => ({
      request,
      reply,
      tool: tool?.name,
      tools: Object.values(options.tools),
      runs: options.runs,
      site: siteOf(options, request),
      heartbeatMs: options.heartbeatMs,
      lastEventId: parseEventId(String(request.headers['last-event-id'] ?? '0')),
      onRejection: options.onRejection
    })
    app.post(path, hidden, async (request, reply) => {
      const { answerJsonRpc } = await loadProtocol()
      await answerJsonRpc(callOf(request, reply))
      return reply
    })
    const httpJson = (operation: (request: FastifyRequest) => HttpJsonOperation | null) =>
      async (request: FastifyRequest, reply: FastifyReply) => {
        const chosen = operation(request)
        if (chosen === null) return reply.callNotFound()
        const { answerHttpJson } = await loadProtocol()
        await answerHttpJson(callOf(request, reply), chosen)
        return reply
      }
    const task = (verbs: Parameters<typeof taskOperation>[1]) => httpJson((request) =>
      taskOperation((request.params as { ref: string }).ref, verbs))
    const fixed = (name: AgentOperation) => httpJson(() => ({ name }))
    // `::` is a literal colon in Fastify's paths.
    app.post(`${path}/message::send`, hidden, fixed('send'))
    app.post(`${path}/message::stream`, hidden, fixed('stream'))
    app.get(`${path}/tasks`, hidden, fixed('list'))
    app.get(`${path}/tasks/:ref`, hidden, task({ '': 'get', subscribe: 'subscribe' }))
    app.post(`${path}/tasks/:ref`, hidden, task({ cancel: 'cancel', subscribe: 'subscribe' }))
    const configs = `${path}/tasks/:ref/pushNotificationConfigs`
    app.post(configs, hidden, task({ '': 'create-config' }))
    app.get(configs, hidden, task({ '': 'list-configs' }))
    const config = (name: ConfigOperation) => httpJson((request) => {
      const { ref, config: configId } = request.params as { ref: string; config: string }
      return { name, id: ref, configId }
    })
    app.get(`${configs}/:config`, hidden, config('get-config'))
    app.delete(`${configs}/:config`, hidden, config('delete-config'))
    app.get(`${path}/extendedAgentCard`, hidden, fixed('extended-card'))
  }
}

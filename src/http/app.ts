import Fastify, { type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { randomUUID } from 'node:crypto'
import type { ToolName } from '../agents/catalog.js'
import type { AgentTool } from '../agents/tools.js'
import type { ApiToken } from '../config.js'
import { serviceError } from '../errors.js'
import type { FleetMember, AgentReadiness, ContainmentMode } from '../schemas/health.js'
import type { Metrics } from '../metrics.js'
import { sharedSchemas } from '../schemas/shared.js'
import { version } from '../version.js'
import { requireBearerToken } from './auth.js'
import { closeConnectionsWhenIdle } from './connections.js'
import { consoleRoutes } from './console.js'
import { answerClientError, formatValidationError, registerErrorHandlers, toErrorResponse } from './error-handler.js'
import { allowedHostNames, requireKnownHost } from './host-check.js'
import { a2aCards, a2aRoutes } from './a2a/route.js'
import mcpRoute from './mcp/route.js'
import { registerOpenApi } from './openapi.js'
import healthRoutes from './routes/health.js'
import runRoutes from './routes/runs.js'
import toolRoutes from './routes/tools.js'
import { sharedSchemaCompilers } from './schema-compilers.js'

/**
 * A JSON body of the largest accepted task: 30,000 characters, each at most a 12-byte surrogate pair escaped as
 * `\uXXXX\uXXXX` (an emoji), plus the other fields.
 */
const BODY_LIMIT_BYTES = 512 * 1024

/** A caller's x-request-id is kept when it is a plain token of reasonable size; anything else gets a fresh id. */
const REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/

/** What the HTTP server itself is built with. */
export interface ServerSettings {
  logLevel: string
  requestTimeoutMs: number
  maxConnections: number
}

export function loggerOptions(config: Pick<ServerSettings, 'logLevel'>): FastifyServerOptions['logger'] {
  const base = { level: config.logLevel, redact: ['req.headers.authorization'] }
  // Pretty lines are for people at a terminal; anything else (files, collectors) gets pino's JSON.
  return process.stdout.isTTY ? { ...base, transport: { target: 'pino-pretty' } } : base
}

/**
 * The Fastify server every part of the service is registered on: its limits, ids, parsers and the one error shape for
 * what Fastify itself refuses. Once it begins to close, every new request is a 503 SHUTTING_DOWN.
 */
export function createServer(config: ServerSettings, logger?: FastifyServerOptions['logger']): FastifyInstance {
  const app = Fastify({
    logger: logger ?? loggerOptions(config),
    bodyLimit: BODY_LIMIT_BYTES,
    requestIdHeader: false,
    genReqId: (request) => {
      const given = request.headers['x-request-id']
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
    },
    // A run may last 30 minutes: no idle timer may cut a quiet response short. Receiving the request is bounded,
    // though (Node's requestTimeout ends once the body is in): a client trickling its headers or body holds nothing
    // for long. Node checks every connectionsCheckingInterval, 30 s by default: far coarser than the bound.
    connectionTimeout: 0,
    // A start may rightly take longer than Fastify's 10 s for one plugin: runs left by a killed service are stopped
    // (inside a WSL distro, a wsl.exe round trip each), the run store recovered, a fleet's Redis reached on a busy
    // host. A start that never ends is still one (a minute), not a hang.
    pluginTimeout: 60_000,
    schemaController: { compilersFactory: sharedSchemaCompilers() },
    // Fastify's own 503 while closing has no `code`: the onRequest hook below answers SHUTTING_DOWN instead.
    return503OnClosing: false,
    requestTimeout: config.requestTimeoutMs,
    http: {
      headersTimeout: Math.min(10_000, config.requestTimeoutMs),
      connectionsCheckingInterval: Math.min(1000, config.requestTimeoutMs)
    },
    clientErrorHandler: answerClientError,
    // The router's own refusals (a URL that cannot be decoded, a parameter over 100 characters), in the shared shape.
    frameworkErrors: (error, _request, reply: FastifyReply) => {
      const body = toErrorResponse(error)
      void reply.code(body.statusCode).send(body)
    },
    forceCloseConnections: 'idle',
    schemaErrorFormatter: formatValidationError,
    ajv: {
      // Unknown fields are an error, not something to drop silently; and a string is not a number.
      customOptions: { removeAdditional: false, coerceTypes: false }
    }
  }).withTypeProvider<TypeBoxTypeProvider>()

  app.server.maxConnections = config.maxConnections

  // Fastify also parses text/plain by default; this API speaks JSON only, so anything else is a 415.
  app.removeContentTypeParser('text/plain')

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id)
  })
  let closing = false
  app.addHook('onRequest', async () => {
    if (closing) throw serviceError('SHUTTING_DOWN')
  })
  // Registered before every other part's: the flag is up before the runs are stopped.
  app.addHook('preClose', () => { closing = true })
  closeConnectionsWhenIdle(app)
  return app
}

export interface RoutesOptions {
  host: string
  apiTokens: ApiToken[]
  allowedHosts: string[]
  publicUrl: string | undefined
  heartbeatMs: number
  tools: Record<ToolName, AgentTool>
  metrics: Metrics
  readiness: () => Promise<AgentReadiness[]>
  containment: { mode: ContainmentMode; reason: string; escapes: string; limits: string }
  isolation: { agents_can_reach: string[] }
  /** ROLE=api: the fleet's roll, told by /readyz. */
  fleet?: { members: () => Promise<FleetMember[]> }
}

/** Every route, behind its checks (tokens, Host/Origin), with the schemas and documents they are described by. */
export const routesPlugin = fp<RoutesOptions>(async (app, options) => {
  const { tools, metrics, apiTokens, heartbeatMs, slots, runs } = { ...options, slots: app.slots, runs: app.runs }
  const toolNames = Object.keys(tools)
  registerErrorHandlers(app, (tool, code) => metrics.observeRejection(tool, code))
  // Without tokens, every route answers this machine's names only: health, metrics and the documents tell a
  // rebinding page about the service as much as the runs do.
  if (apiTokens.length === 0) requireKnownHost(app, allowedHostNames(options.host, options.allowedHosts))
  for (const schema of sharedSchemas(toolNames)) app.addSchema(schema)
  await registerOpenApi(app, Object.values(tools).map((tool) => tool.spec.agent), options.publicUrl)
  // The page needs no token to load (it asks for one); nor do A2A's cards (discovery says how to authenticate).
  await app.register(consoleRoutes)
  const a2a = {
    tools,
    runs,
    version,
    publicUrl: options.publicUrl,
    secured: apiTokens.length > 0,
    heartbeatMs,
    onRejection: (tool: string, code: string) => metrics.observeRejection(tool, code)
  }
  await app.register(a2aCards, a2a)
  await app.register(async (authenticated) => {
    await requireBearerToken(authenticated, apiTokens)
    await authenticated.register(toolRoutes, { heartbeatMs, tools, slots, queuedRuns: app.queuedRuns, runs })
    await authenticated.register(runRoutes, { runs, toolNames, heartbeatMs })
    await authenticated.register(mcpRoute, {
      tools,
      runs,
      version,
      onRejection: (tool, code) => metrics.observeRejection(tool, code)
    })
    await authenticated.register(a2aRoutes, a2a)
  })
  const { readiness, containment, isolation, fleet } = options
  await app.register(healthRoutes, {
    tokens: apiTokens, readiness, metrics, slots, containment, isolation, ...(fleet === undefined ? {} : { fleet })
  })
}, { name: 'routes', dependencies: ['slots', 'runs'] })

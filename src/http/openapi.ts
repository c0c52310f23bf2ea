import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import { docsPolicy } from './docs-policy.js'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { stringify } from 'yaml'
import { ERROR_CODES } from '../schemas/error.js'
import { forCallers } from '../schemas/for-callers.js'
import { WEBHOOKS } from '../schemas/webhook-event.js'
import { version } from '../version.js'

const errorTable = Object.entries(ERROR_CODES)
  .flatMap(([status, codes]) => Object.entries(codes).map(([code, [when]]) => `| ${status} | \`${code}\` | ${when} |`))
  .join('\n')

const description = (agents: readonly string[]) =>
  `Hands a task to an AI coding agent on the command line — here ${agents.join(', ')}, one
tool each (\`POST /tools/<agent>_run\`) — and answers with the exit code and what the agent said.

Every run that started answers 200 with a \`RunResult\`, whatever its end (\`ok\` says whether it went well).
Every error answers the one \`ErrorResponse\` shape; its \`code\` is meant for programs:

| status | code | when |
|---|---|---|
${errorTable}

Every response carries \`x-request-id\` (the caller's, if it sent one).`

interface OpenApiDocument {
  components: { schemas: Record<string, Record<string, unknown>> }
}

function describeForCallers(document: OpenApiDocument): OpenApiDocument {
  const { schemas } = document.components
  for (const name of Object.keys(schemas)) schemas[name] = forCallers(schemas[name]!)
  return document
}

/**
 * The contract, generated from the routes' schemas: \`openapi.yaml\` at the repository root is this plugin's output
 * (\`npm run openapi\`). Register it before the routes, whose onRoute events it collects.
 */
export async function registerOpenApi(
  app: FastifyInstance,
  agents: readonly string[],
  publicUrl: string | undefined
): Promise<void> {
  // A served document names the server it came from (or PUBLIC_URL, behind a proxy), so that a client generated from
  // it calls this deployment; the checked-in file names the default address.
  const servedFrom = (request: FastifyRequest) => [{ url: publicUrl ?? `${request.protocol}://${request.host}` }]

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'agent-runner',
        version,
        description: description(agents),
        license: { name: 'UNLICENSED', identifier: 'UNLICENSED' }
      },
      // The default address; a deployment elsewhere is a client's base URL, not a different contract.
      servers: [{ url: 'http://127.0.0.1:8080', description: 'The service with its default HOST and PORT' }],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'One of API_TOKENS, when the deployment sets them.'
          }
        }
      },
      // What the service calls: each run's webhook events (OpenAPI 3.1's `webhooks`).
      webhooks: WEBHOOKS,
      // A bearer token where API_TOKENS is set; none on a loopback deployment without tokens. Health routes opt out.
      security: [{ bearerAuth: [] }, {}],
      tags: [
        { name: 'tools', description: 'Run a coding agent on a task' },
        { name: 'health', description: 'Liveness and readiness, open without a token' }
      ]
    },
    // Only ever an OpenAPI document: the `openapi` option is set, so @fastify/swagger never builds Swagger 2.0 here.
    transformObject: (documentObject) =>
      describeForCallers((documentObject as { openapiObject: OpenApiDocument }).openapiObject),
    // Shared schemas appear in components/schemas under their $id (RunParams…), not as def-0, def-1; each has one.
    refResolver: { buildLocalReference: (json) => json['$id'] as string }
  })

  app.get(
    '/openapi.json',
    {
      schema: {
        // The document describes the API, not where it is published (like the /docs pages).
        hide: true
      }
    },
    async (request) => ({ ...app.swagger(), servers: servedFrom(request) })
  )
  app.get(
    '/openapi.yaml',
    {
      schema: {
        hide: true
      }
    },
    // Written by the same YAML library and options as @fastify/swagger's (and so openapi.yaml): only `servers` differs.
    async (request, reply) => {
      const document = { ...app.swagger(), servers: servedFrom(request) }
      return reply.type('application/yaml').send(stringify(document, { strict: false }))
    }
  )

  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: true,
    transformStaticCSP: docsPolicy,
    // "Try it out" should call the server that served the page, not the document's default address.
    transformSpecification: (spec, request) => ({ ...spec, servers: servedFrom(request) })
  })
}

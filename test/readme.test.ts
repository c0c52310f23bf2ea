import { execFile } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { build, createRun, fromRoot, listen, settled, tempDir } from './helpers/index.js'
import { startPrism, violationsOf, type Violation } from './helpers/prism.js'
import { scene } from './workspaces/repos.js'

const run = promisify(execFile)
/** README.md and every page under docs/: their curl examples are all run. */
const DOCUMENTS = [
  'README.md',
  ...readdirSync(fromRoot('docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`)
]
const DOCUMENTED_ADDRESS = 'http://127.0.0.1:8080'
/** The examples read the token from $TOKEN, as a reader would export it, and a repository's path from $REPO. */
const EXAMPLE_TOKEN = 'readme-example-token'

/** Every curl command in a document's sh blocks, continuation lines included, as a shell would read it. */
function curlCommands(markdown: string): string[] {
  const commands: string[] = []
  for (const [, block] of markdown.matchAll(/^```sh\n([\s\S]*?)^```/gm)) {
    let pending = ''
    for (const line of block!.split('\n')) {
      pending += `${line}\n`
      if (line.endsWith('\\')) continue
      if (pending.trimStart().startsWith('curl ')) commands.push(pending.trim())
      pending = ''
    }
  }
  return commands
}

/**
 * What a command asks for: its method, its path, and the stream it asks the tool routes for (same path, another
 * answer), e.g. `POST /tools/crush_run (ndjson)` or `GET /runs/$RUN_ID`.
 */
function requestOf(command: string): string {
  const method = /\s-X\s+([A-Z]+)/.exec(command)?.[1] ?? (/\s-d\s/.test(command) ? 'POST' : 'GET')
  const path = new URL(command.match(/http:\/\/\S+/)![0]).pathname
  const stream = /'accept: application\/x-ndjson'/i.test(command)
    ? ' (ndjson)'
    : /'accept: text\/event-stream'/i.test(command) ? ' (sse)' : ''
  return `${method} ${path}${stream}`
}

/**
 * What each documented request must answer; a new example needs an entry here, or the test says so. `$RUN_ID` is an
 * async run started (and finished) before the examples run.
 */
function expectations(runId: string): Record<string, object | RegExp> {
  const result = { tool: 'crush_run', ok: true, exit_code: 0, stop_reason: null, output: String }
  return {
    'POST /tools/crush_run': result,
    'POST /tools/claude_run': { ...result, tool: 'claude_run' },
    'POST /tools/codex_run': { ...result, tool: 'codex_run' },
    'POST /tools/crush_run (ndjson)': /^\{"type":"result","result":\{"tool":"crush_run","ok":true/m,
    'POST /tools/crush_run (sse)': /^event: result\ndata: \{"type":"result","result":\{"tool":"crush_run","ok":true/m,
    'POST /runs': { id: String, tool: 'crush_run', kind: 'async', status: 'running', result: null },
    'GET /runs': { runs: [{ id: String, tool: 'crush_run', kind: 'async', status: String }] },
    'GET /runs/$RUN_ID': { id: runId, status: 'succeeded', result },
    'GET /runs/$RUN_ID/events':
      /^event: result\ndata: \{"type":"result","id":\d+,"result":\{"tool":"crush_run","ok":true/m,
    'DELETE /runs/$RUN_ID': { id: runId, status: 'succeeded', result },
    'POST /mcp': /^data: \{"result":\{"tools":\[\{"name":"crush_run"/m,
    'GET /healthz': { status: 'ok' },
    'GET /readyz': {
      status: 'ready', agents: [{ tool: 'crush_run', path: String }, { tool: 'claude_run', path: String }]
    },
    // An async run an earlier example started may still hold its slot.
    'GET /metrics': /^agent_runner_slots_in_use\{tool="crush_run"\} [0-2]$/m,
    'GET /tools': { tools: [{ name: 'crush_run', limit: 2 }, { name: 'claude_run', limit: 2 }] },
    'GET /openapi.json': { openapi: '3.1.0', paths: { '/tools/crush_run': Object, '/tools/claude_run': Object } }
  }
}

/** README shows one example of each family of routes; the rest of the API is in docs/api.md. */
const README_FAMILIES = [
  'POST /tools/crush_run',
  'POST /tools/crush_run (ndjson)',
  'POST /runs',
  'GET /healthz',
  'GET /readyz',
  'GET /metrics',
  'GET /tools',
  'GET /openapi.json'
]

t.test("README's and docs' curl examples run as written against the stand-in agents", async (t) => {
  const examples = DOCUMENTS.flatMap((document) =>
    curlCommands(readFileSync(fromRoot(document), 'utf8')).map(
      (command) => ({ document, command, request: requestOf(command) })
    )
  )
  const inReadme = examples.filter((example) => example.document === 'README.md').map((example) => example.request)
  t.same(README_FAMILIES.filter((request) => !inReadme.includes(request)), [], 'README shows every family of routes')
  t.match(readFileSync(fromRoot('README.md'), 'utf8'), /`POST \/mcp`/, 'README mentions MCP')
  t.ok(examples.some((example) => example.request === 'POST /mcp'), 'the docs call MCP')

  const address = await listen(t, await build(t, { API_TOKENS: EXAMPLE_TOKEN }))
  const port = new URL(address).port
  // The run the examples name as $RUN_ID, finished before they read, follow and cancel it.
  const headers = { authorization: `Bearer ${EXAMPLE_TOKEN}` }
  const { id: runId } = await createRun(address, { tool: 'crush_run', task: 'An async run to follow' }, headers)
  t.match(
    await settled(address, runId, 10_000, headers), { status: 'succeeded' }, 'the run $RUN_ID stands for has ended'
  )
  const EXPECTED = expectations(runId)

  // Nothing the commands might write lands in the repository; a worktree run's is a repository of the test's own.
  const cwd = tempDir(t)
  const { repo } = scene(t)
  for (const { document, command, request } of examples) {
    t.test(`${document}: curl ${request}`, async (t) => {
      t.ok(command.includes(DOCUMENTED_ADDRESS), `the example calls ${DOCUMENTED_ADDRESS}`)
      const runnable = command.replaceAll(DOCUMENTED_ADDRESS, `http://127.0.0.1:${port}`)
      // The documents' text run by a shell on purpose: that is how a reader runs it.
      const { stdout } = await run('sh', ['-c', runnable], {
        cwd, env: { ...process.env, TOKEN: EXAMPLE_TOKEN, RUN_ID: runId, REPO: repo }
      })
      const expected = EXPECTED[request]
      if (expected === undefined) {
        return t.fail(`no expected answer for ${request}: add one to expectations() in test/readme.test.ts`)
      }
      t.match(
        expected instanceof RegExp ? stdout : JSON.parse(stdout), expected, `${request} answers as ${document} says`
      )
      // A reader without tokens sends no empty bearer token (a proxy checking the document refuses one).
      const printArgs = 'curl() { printf "%s\\n" "$@"; }; '
      const untokened = await run('sh', ['-c', printArgs + runnable], {
        cwd, env: { ...process.env, TOKEN: '', RUN_ID: runId }
      })
      t.notMatch(untokened.stdout, /^authorization:/im, 'no Authorization header when $TOKEN is empty')
    })
  }
})

t.test("README's and docs' curl examples through Prism, with a token and without: " +
  'nothing breaks the document', async (t) => {
  const examples = DOCUMENTS.flatMap((document) =>
    curlCommands(readFileSync(fromRoot(document), 'utf8')).map(
      (command) => ({ document, command, request: requestOf(command) })
    )
  )
  const tokened = await listen(t, await build(t, { API_TOKENS: EXAMPLE_TOKEN }))
  const open = await listen(t, await build(t))
  const headers = { authorization: `Bearer ${EXAMPLE_TOKEN}` }
  const readers = [
    {
      who: 'with $TOKEN',
      base: await startPrism(t, tokened),
      token: EXAMPLE_TOKEN,
      runId: (await createRun(tokened, { tool: 'crush_run', task: 'x' }, headers)).id
    },
    {
      who: 'with an empty $TOKEN',
      base: await startPrism(t, open),
      token: '',
      runId: (await createRun(open, { tool: 'crush_run', task: 'x' })).id
    }
  ]
  await Promise.all([settled(tokened, readers[0]!.runId, 10_000, headers), settled(open, readers[1]!.runId, 10_000)])
  const cwd = tempDir(t)
  const { repo } = scene(t)
  for (const { document, command, request } of examples) {
    for (const { who, base, token, runId } of readers) {
      // The response's headers, where Prism writes what it found (sl-violations), beside what the example prints.
      const dump = join(cwd, 'headers')
      const runnable = command.replaceAll(DOCUMENTED_ADDRESS, base).replace(/^curl /, `curl -D ${dump} `)
      await run('sh', ['-c', runnable], { cwd, env: { ...process.env, TOKEN: token, RUN_ID: runId, REPO: repo } })
      const answer = readFileSync(dump, 'utf8')
      const status = /^HTTP\/[\d.]+ (\d+)/m.exec(answer)?.[1]
      const mediaType = /^content-type: ([^;\r\n]+)/im.exec(answer)?.[1] ?? ''
      const violations = JSON.parse(/^sl-violations: (.*)$/im.exec(answer)?.[1]?.trim() ?? '[]') as Violation[]
      // The document describes the API, not where it is published: its own routes are not in it, which Prism notes.
      const published = request === 'GET /openapi.json'
        ? violations.filter((violation) => violation.message !== 'Selected route not found')
        : violations
      t.same(
        violationsOf(published, mediaType, 'both'), [],
        `${document}: curl ${request}, ${who}: ${status} ${mediaType}, request and response as documented`
      )
      t.ok(status !== undefined && Number(status) < 400, `${document}: curl ${request}, ${who}: answered ${status}`)
    }
  }
})

import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { build, listen, tempDir } from './helper.js'
import { ERROR_CODES } from '../src/schemas/error.js'

const run = promisify(execFile)
const README = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8')
const DOCUMENTED_ADDRESS = 'http://127.0.0.1:8080'
/** README's examples read the token from $TOKEN, as a reader would export it. */
const README_TOKEN = 'readme-example-token'

/** Every curl command in README's sh blocks, continuation lines included, as a shell would read it. */
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

/** What each documented URL must answer; a new example needs an entry here, or the test says so. */
const EXPECTED: Record<string, object | RegExp> = {
  '/metrics': /^agent_runner_slots_in_use\{tool="crush_run"\} 0$/m,
  '/tools/crush_run': { tool: 'crush_run', ok: true, exit_code: 0, stop_reason: null, output: String },
  '/tools/claude_run': { tool: 'claude_run', ok: true, exit_code: 0, stop_reason: null, output: String },
  '/healthz': { status: 'ok' },
  '/readyz': { status: 'ready', agents: [{ tool: 'crush_run', path: String }, { tool: 'claude_run', path: String }] },
  '/tools': { tools: [{ name: 'crush_run', limit: 2 }, { name: 'claude_run', limit: 2 }] },
  '/tools/crush_run (ndjson)': /^\{"type":"result","result":\{"tool":"crush_run","ok":true/m,
  '/runs': { id: String, tool: 'crush_run', status: 'running', result: null },
  '/openapi.json': { openapi: '3.1.0', paths: { '/tools/crush_run': Object, '/tools/claude_run': Object } }
}

t.test("README's curl examples run as written against the stand-in agents", async (t) => {
  const commands = curlCommands(README)
  // An example that asks for a stream is its own case: same path, another answer.
  const paths = commands.map(
    (command) => new URL(command.match(/http:\/\/\S+/)![0]).pathname + (command.includes('accept: application/x-ndjson') ? ' (ndjson)' : '')
  )
  t.ok(paths.includes('/tools/crush_run') && paths.includes('/tools/claude_run'), 'README shows both tools')

  const address = await listen(t, await build(t, { API_TOKENS: README_TOKEN }))
  const port = new URL(address).port
  // Nothing the commands might write lands in the repository.
  const cwd = tempDir(t)
  for (const [index, command] of commands.entries()) {
    const path = paths[index]!
    t.test(`curl ${path}`, async (t) => {
      t.ok(command.includes(DOCUMENTED_ADDRESS), `the example calls ${DOCUMENTED_ADDRESS}`)
      const runnable = command.replaceAll(DOCUMENTED_ADDRESS, `http://127.0.0.1:${port}`)
      // README text run by a shell on purpose: that is how a reader runs it.
      const { stdout } = await run('sh', ['-c', runnable], { cwd, env: { ...process.env, TOKEN: README_TOKEN } })
      const expected = EXPECTED[path]
      if (expected === undefined) return t.fail(`no expected answer for ${path}: add one to EXPECTED in test/readme.test.ts`)
      t.match(expected instanceof RegExp ? stdout : JSON.parse(stdout), expected, `${path} answers as README says`)
    })
  }
})

t.test("README's error table is the error catalog: every code with its status, and nothing else", async (t) => {
  const section = README.slice(README.indexOf('| status | code | when |'), README.indexOf('Every response carries `x-request-id`'))
  const documented = new Set(
    [...section.matchAll(/^\| (\d{3}) \| ([^|]+) \|/gm)].flatMap(([, status, codes]) => [...codes!.matchAll(/`([A-Z_]+)`/g)].map(([, code]) => `${status} ${code}`))
  )
  const catalog = new Set(Object.entries(ERROR_CODES).flatMap(([status, codes]) => Object.keys(codes).map((code) => `${status} ${code}`)))
  // Not in the catalog because no route's schema answers it: an unknown route has no schema to list it in.
  catalog.add('404 ROUTE_NOT_FOUND')
  t.same([...catalog].filter((entry) => !documented.has(entry)), [], 'every code the service answers with is in README')
  t.same([...documented].filter((entry) => !catalog.has(entry)), [], 'README names no code the service does not have')
})

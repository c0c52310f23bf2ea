import { Ajv2020 } from 'ajv/dist/2020.js'
import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { parse as parseYaml, stringify } from 'yaml'
import { build, fromRoot, listen, tempDir } from '../helpers/index.js'
import { constAsEnum } from '../helpers/json-schema.js'
import { npmTool } from '../helpers/npm-tool.js'

// Clients nobody here wrote, reading the contract as it is published: the MCP Inspector's CLI over tools/list and
// tools/call, and a client hey-api generates from openapi.yaml, compiled under `strict`.

const run = promisify(execFile)
const TOKEN = 'alice-secret'

interface ListedTool { name: string, inputSchema: object, outputSchema: object }

t.test('the MCP Inspector CLI: every tool’s schemas are the document’s, valid JSON Schema 2020-12; ' +
  'errors carry a code', async (t) => {
  const inspector = await npmTool('@modelcontextprotocol/inspector', '2.12.0', 'mcp-inspector')
  const app = await build(t, { API_TOKENS: `alice:${TOKEN}`, MAX_CRUSH_AGENTS: '1' })
  const url = `${await listen(t, app)}/mcp`
  const home = tempDir(t)
  const inspect = async (...args: string[]): Promise<any> => {
    const { stdout } = await run(inspector, [
      '--cli', url, '--transport', 'http', '--header', `Authorization: Bearer ${TOKEN}`, ...args
    ], {
      env: { ...process.env, HOME: home, MCP_CATALOG_PATH: join(home, 'mcp.json') },
      timeout: 60_000
      // It exits 5 for a tool error, having printed the call's result all the same.
    }).catch((error: unknown) => {
      if ((error as { code?: unknown }).code === 5) return error as { stdout: string }
      throw error
    })
    return JSON.parse(stdout)
  }

  const { tools } = (await inspect('--method', 'tools/list')) as { tools: ListedTool[] }
  const document = parseYaml(readFileSync(fromRoot('openapi.yaml'), 'utf8')) as {
    components: { schemas: Record<string, Record<string, unknown>> }
  }
  const { examples: _examples, ...documented } = document.components.schemas['RunParams']!
  const ajv = new Ajv2020({ strict: true })
  t.ok(tools.length >= 5, `${tools.length} tools listed`)
  for (const tool of tools) {
    t.same(constAsEnum(tool.inputSchema), documented, `${tool.name}: the document's RunParams`)
    t.ok(
      ajv.validateSchema(tool.inputSchema) && ajv.validateSchema(tool.outputSchema),
      `${tool.name}: valid 2020-12 schemas`
    )
  }
  const input = ajv.compile(tools[0]!.inputSchema)
  t.ok(input({ task: 'x' }), 'a task alone is enough: no timeout asked for')
  t.notOk(input({ task: 'x', wsl_user: 'dev' }), 'wsl_user without wsl_distro is refused, as the service does')

  const output = ajv.compile(tools[0]!.outputSchema)
  const done = await inspect('--method', 'tools/call', '--tool-name', 'crush_run', '--tool-arg', 'task=say hello')
  t.match(done, { isError: false, structuredContent: { tool: 'crush_run', ok: true } }, 'a call runs the agent')
  t.ok(output(done.structuredContent), 'its result matches the output schema')
  const refused = await inspect(
    '--method', 'tools/call', '--tool-name', 'crush_run', '--tool-arg', 'task=x', '--tool-arg', 'timeout=0'
  )
  t.match(
    refused,
    {
      isError: true,
      structuredContent: { statusCode: 400, code: 'VALIDATION_ERROR', message: 'body/timeout must be >= 1' }
    },
    'a refusal carries the REST error object'
  )
  t.ok(output(refused.structuredContent), 'which matches the output schema too')
})

/** Reads the follow stream's items as the generated client hands them out: typed, or the compiler says why not. */
const READS_ITEMS = `import { followRun } from './client/sdk.gen'

export async function resultOf (id: string): Promise<boolean | undefined> {
  const { stream } = await followRun({ path: { id } })
  for await (const event of stream) {
    if (event.type === 'result') return event.result.ok
    if (event.type === 'step') console.log(event.step.kind)
  }
  return undefined
}
`

t.test('a client hey-api generates from openapi.yaml types the follow stream’s items (tsc --strict)', async (t) => {
  const generator = await npmTool('@hey-api/openapi-ts', '0.99.0', 'openapi-ts', ['typescript@5.9.3'])
  const compiles = async (document: string): Promise<string> => {
    const dir = tempDir(t)
    const input = join(dir, 'openapi.yaml')
    writeFileSync(input, document)
    await run(
      generator, ['-i', input, '-o', join(dir, 'client'), '-c', '@hey-api/client-fetch'], { cwd: dir, timeout: 120_000 }
    )
    writeFileSync(join(dir, 'reads-items.ts'), READS_ITEMS)
    const flags = [
      '--noEmit', '--strict', '--skipLibCheck', '--target', 'es2022', '--module', 'preserve', '--moduleResolution',
      'bundler', '--lib', 'es2022,dom,dom.iterable,dom.asynciterable'
    ]
    return run(
      fromRoot('node_modules/.bin/tsc'), [...flags, 'reads-items.ts'], { cwd: dir }
    ).then(() => '', (error: unknown) => (error as { stdout: string }).stdout)
  }
  const published = readFileSync(fromRoot('openapi.yaml'), 'utf8')
  t.equal(await compiles(published), '', 'each event is a RunEvent: its type narrows it to a result or a step')

  // The control: the stream described as the string its body is, as it once was, and the same code no longer compiles.
  const untyped = parseYaml(published) as { paths: Record<string, any> }
  untyped.paths['/runs/{id}/events'].get.responses['200'].content['text/event-stream'].schema = { type: 'string' }
  t.match(
    await compiles(stringify(untyped)), /Property 'type' does not exist on type 'string'/,
    'an untyped stream hands out strings'
  )
})

import t from 'tap'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { buildApp } from '#src/service/app.js'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import type { AgentSpec } from '#src/agents/spec.js'
import { loadConfig } from '#src/config.js'
import { listen, scenario, standInEnv, tempDir, TEST_AGENT_ENV_ALLOW } from '../helpers/index.js'

// Adding an agent is one file: a sixth agent, declared here alone, becomes a tool with its route, its variables, its
// limit, its async runs, its OpenAPI operation, its MCP tool and its metrics, with no change anywhere else.

const echo: AgentSpec = {
  agent: 'echo',
  // The crush stand-in, under this agent's own variable: it prints what it was given.
  defaultBin: 'not-installed-echo',
  env: ['ECHO_*'],
  summary: 'Echo a task (a throwaway agent for this test)',
  description: 'Runs the crush stand-in with the task as its prompt.',
  args: (settings) => ['run', ...settings.extraArgs],
  taskInArgv: (task) => ['--', task],
  // Plain text read line by line; its report is what it printed, upper-cased.
  steps: () => {
    const lines: string[] = []
    return {
      readsText: true,
      read: (line) => { lines.push(String(line)); return [] },
      session: () => null,
      report: () => ({ text: lines.join('\n').trim().toUpperCase(), report: { is_error: false, subtype: 'echo' } })
    }
  }
}

t.test('a spec in a list is a whole tool', async (t) => {
  const config = loadConfig(
    {
      ECHO_BIN: 'crush',
      MAX_ECHO_AGENTS: '1',
      ECHO_EXTRA_ARGS: '["--quiet"]',
      AGENT_CONTAINMENT: 'process-group',
      DATA_DIR: tempDir(t),
      RUNS_STORE: 'memory',
      LOG_LEVEL: 'silent',
      AGENT_ENV_ALLOW: TEST_AGENT_ENV_ALLOW
    },
    [...BUILT_IN_AGENTS, echo]
  )
  const app = await buildApp(config, { logger: false, agentEnv: standInEnv({ ECHO_KEY: 'echo-secret' }) })
  t.teardown(() => app.close())

  const run = await app.inject({ method: 'POST', url: '/tools/echo_run', payload: { task: 'hello there' } })
  t.equal(run.statusCode, 200)
  t.match(
    run.json(), { tool: 'echo_run', ok: true, command: ['crush', 'run', '--quiet', '--', 'hello there'] },
    'its binary and extra options from ECHO_*'
  )
  t.match(run.json().output, /"PROMPT":"HELLO THERE"/, 'its report parser made the answer')

  const printedEnv = async (tool: string): Promise<string> =>
    (await app.inject({ method: 'POST', url: `/tools/${tool}`, payload: { task: scenario.env() } })).json().output
  // Its parser upper-cases what the stand-in printed.
  t.match(await printedEnv('echo_run'), /"ECHO_KEY":"ECHO-SECRET"/, 'the variables its spec names reach it')
  t.notMatch(await printedEnv('crush_run'), /ECHO_KEY/, 'and no other agent')

  const tools = (await app.inject({ method: 'GET', url: '/tools' })).json<{
    tools: Array<{ name: string; limit: number }>
  }>()
  t.same(tools.tools.map((tool) => tool.name), [...BUILT_IN_AGENTS.map((spec) => `${spec.agent}_run`), 'echo_run'])
  t.match(tools.tools.at(-1), { name: 'echo_run', agent: 'echo', limit: 1 }, 'its limit from MAX_ECHO_AGENTS')

  // Its MCP tool, through the SDK's own client: listed after the catalog's, and run by tools/call.
  const client = new Client({ name: 'agent-runner-test', version: '0.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${await listen(t, app)}/mcp`)))
  t.teardown(() => client.close())
  const { tools: listed } = await client.listTools()
  t.same(
    listed.map((tool) => tool.name), tools.tools.map((tool) => tool.name), 'tools/list: the same tools as GET /tools'
  )
  const echoTool = listed.find((tool) => tool.name === 'echo_run')
  t.match(echoTool, { title: echo.summary, description: echo.description }, 'tools/list: its summary and description')
  t.same(echoTool?.inputSchema, listed[0]?.inputSchema, 'tools/list: the same input as the catalog\'s tools')
  t.match(echoTool?.outputSchema, { anyOf: [{ properties: { tool: { anyOf: [{ const: listed[0]?.name }] } } }] })
  t.ok(JSON.stringify(echoTool?.outputSchema).includes('"const":"echo_run"'), 'its results name it among the tools')
  const called = await client.callTool({ name: 'echo_run', arguments: { task: 'over mcp' } })
  t.match(
    called,
    {
      isError: false,
      structuredContent: { tool: 'echo_run', ok: true, command: ['crush', 'run', '--quiet', '--', 'over mcp'] }
    },
    'tools/call runs it'
  )
  t.match(called.content, [{ type: 'text', text: /"PROMPT":"OVER MCP"/ }], 'its report parser made the answer')
  const followed = await client.callTool(
    { name: 'echo_run', arguments: { task: 'over mcp' } }, undefined, { onprogress: () => {} }
  )
  t.match(
    followed.structuredContent, { ok: true, command: ['crush', 'run', '--quiet', '--', 'over mcp'] },
    'a call with progress runs it the same'
  )

  const created = await app.inject({ method: 'POST', url: '/runs', payload: { tool: 'echo_run', task: 'later' } })
  t.equal(created.statusCode, 202, 'POST /runs takes it')
  const refused = await app.inject({ method: 'POST', url: '/runs', payload: { tool: 'nope_run', task: 'x' } })
  t.match(refused.json(), { statusCode: 400, code: 'VALIDATION_ERROR' }, 'and only the tools there are')

  const document = (await app.inject({ method: 'GET', url: '/openapi.json' })).json()
  t.match(document.paths['/tools/echo_run'].post, {
    operationId: 'echoRun', summary: echo.summary, description: echo.description
  })
  t.ok(
    document.components.schemas.RunRequest.properties.tool.anyOf.some(
      (option: { enum: string[] }) => option.enum.includes('echo_run')
    ),
    'RunRequest names it'
  )
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body
  t.match(metrics, /agent_runner_slots_in_use\{tool="echo_run"\} [01]/, 'its metrics label')
})

t.test('an agent’s variables are checked like the others', async (t) => {
  t.throws(() => loadConfig({ MAX_ECHO_AGENTS: 'many' }, [echo]), /MAX_ECHO_AGENTS/)
  t.throws(() => loadConfig({ ECHO_EXTRA_ARGS: 'not json' }, [echo]), /ECHO_EXTRA_ARGS/)
  t.equal(loadConfig({}, [echo]).agents[0]!.settings.bin, 'not-installed-echo', 'its default binary')
})

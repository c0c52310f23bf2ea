import t from 'tap'
import { build, runTool, scenario, standInEnv, TEST_AGENT_ENV_ALLOW, type ToolName } from '../helpers/index.js'

// What each agent inherits of the service's environment (src/agents/environment.ts, each spec's `env`): the common
// allow list and its own providers' keys, never the service's secrets nor another agent's keys.

const TOKEN = 'test-token-5f1c0a'
const auth = { authorization: `Bearer ${TOKEN}` }

/** The environment the agent printed (`@env`), from the line of its output that holds it. */
const printedEnv = (output: string): Record<string, string> =>
  JSON.parse(output.split('\n').find((line) => line.startsWith('{"') && line.includes('"PATH"'))!)

t.test('the agent gets its provider keys and never the service secrets', async (t) => {
  const app = await build(t, { API_TOKENS: TOKEN }, standInEnv({
    API_TOKENS: TOKEN,
    ANTHROPIC_API_KEY: 'sk-ant-test',
    OPENAI_API_KEY: 'sk-openai-test',
    CLAUDE_CONFIG_DIR: '/cfg',
    XDG_CONFIG_HOME: '/xdg',
    REDIS_URL: 'redis://secret',
    SOME_UNRELATED_SECRET: 'nope',
    XDG_RUNTIME_DIR: '/run/user/1000',
    DBUS_SESSION_BUS_ADDRESS: 'unix:path=/run/user/1000/bus',
    LANG: 'fr_FR.UTF-8'
  }))
  const envOf = async (tool: ToolName) => printedEnv((await runTool(app, tool, { task: scenario.env() }, auth)).output)
  const crush = await envOf('crush_run')
  t.match(crush, {
    ANTHROPIC_API_KEY: 'sk-ant-test',
    OPENAI_API_KEY: 'sk-openai-test',
    XDG_CONFIG_HOME: '/xdg',
    LANG: 'fr_FR.UTF-8',
    PATH: String,
    HOME: String
  })
  t.notOk('CLAUDE_CONFIG_DIR' in crush, 'Claude’s settings are Claude’s alone')
  // The last two would let `systemd-run --user` start a process outside the run's containment.
  for (const name of [
    'API_TOKENS', 'REDIS_URL', 'SOME_UNRELATED_SECRET', 'XDG_RUNTIME_DIR', 'DBUS_SESSION_BUS_ADDRESS'
  ]) {
    t.notOk(name in crush, `${name} is not passed on`)
  }

  // Each agent gets its own providers' keys, not the others'.
  const claude = await envOf('claude_run')
  t.match(claude, { ANTHROPIC_API_KEY: 'sk-ant-test', CLAUDE_CONFIG_DIR: '/cfg' })
  t.notOk('OPENAI_API_KEY' in claude, 'claude does not see the OpenAI key')
  const codex = await envOf('codex_run')
  t.match(codex, { OPENAI_API_KEY: 'sk-openai-test' })
  t.notOk(
    'ANTHROPIC_API_KEY' in codex || 'CLAUDE_CONFIG_DIR' in codex,
    'codex sees neither Anthropic’s key nor Claude’s settings'
  )
})

t.test('the allow and deny lists are configurable; deny wins, and API_TOKENS can never be allowed', async (t) => {
  const app = await build(t, {
    AGENT_ENV_ALLOW: `${TEST_AGENT_ENV_ALLOW},MY_*,API_TOKENS`, AGENT_ENV_DENY: 'MY_PRIVATE'
  }, standInEnv({
    MY_SETTING: 'yes',
    MY_PRIVATE: 'no',
    API_TOKENS: TOKEN
  }))
  const env = printedEnv((await runTool(app, 'crush_run', { task: scenario.env() })).output)
  t.equal(env['MY_SETTING'], 'yes')
  t.notOk('MY_PRIVATE' in env)
  t.notOk('API_TOKENS' in env)
})

t.test('on Windows, the variables meant for the distro travel through WSLENV', async (t) => {
  const app = await build(
    t, { AGENT_HOST_PLATFORM: 'win32' }, standInEnv({ ANTHROPIC_API_KEY: 'sk-ant-test', WSLENV: 'EXISTING/u' })
  )
  const { output } = await runTool(app, 'crush_run', { task: scenario.env(), wsl_distro: 'Ubuntu' })
  const env = JSON.parse(
    output.split('\n').find((line) => line.startsWith('{"') && !line.startsWith('{"wsl_argv'))!
  ) as Record<string, string>
  const names = env['WSLENV']!.split(':')
  t.ok(names.includes('ANTHROPIC_API_KEY'), 'the provider key crosses into the distro')
  t.ok(names.includes('EXISTING/u'), 'what WSLENV already said is kept')
  t.notOk(names.includes('PATH'), 'the Windows PATH does not replace the distro’s')
})

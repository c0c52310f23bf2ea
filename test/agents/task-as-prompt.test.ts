import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { toolNameOf, type AgentSettings, type AgentSpec } from '#src/agents/spec.js'
import { AgentTool, type AgentInvocation } from '#src/agents/tools.js'
import { loadConfig } from '#src/config.js'
import type { RunResult } from '../generated/openapi.js'
import { build, parseNdjson, standInEnv, tempDir } from '../helpers/index.js'

// Each agent has a service of its own (its own log of starts): they run side by side.
t.jobs = 2

// Whatever a task looks like, every agent of the catalog reads it as its prompt, byte for byte, in batch and live runs
// alike: on its standard input, where no other local user reads it and no command line limits it, or, for a CLI that
// does not read a piped prompt as it is (crush), as the word after `--` (CONTRIBUTING's "never readable as an option").
// A new agent in the catalog is held to this without a line here.

/**
 * Tasks a CLI could read as something else: stdin (`-`), its end of options, its options (gemini's own among them),
 * its subcommands (codex's, crush's and opencode's), a file to attach, an option behind a newline.
 */
const HOSTILE_TASKS = [
  '-', '--', '--help', '-x', '-p foo', '--prompt=x', 'resume', 'review', 'run', '@file', '\n--help',
  // Blanks a CLI could trim, words opencode would quote, a line end of Windows.
  '  two words, "quoted"  \r\n\n', '\t!'
]

/** Each agent's settings as a service with no agent variables set runs it: what `build` gives the tests below. */
const DEFAULT_SETTINGS = new Map(loadConfig({}).agents.map(({ spec, settings }) => [spec.agent, settings]))
const settingsOf = (spec: AgentSpec): AgentSettings => DEFAULT_SETTINGS.get(spec.agent)!

/**
 * Whether an invocation puts the task only where a CLI reads its prompt: on its standard input, with an argv that is
 * the same whatever the task (`ordinary`: the invocation of another one), or as the one word after the first `--`
 * (cobra, clap, commander and yargs all read what follows it as positionals) and nowhere else.
 */
function takesAsPrompt(invocation: AgentInvocation, task: string, ordinary: AgentInvocation): boolean {
  if (invocation.input !== undefined) {
    return invocation.input === task && JSON.stringify(invocation.args) === JSON.stringify(ordinary.args)
  }
  const marker = invocation.args.indexOf('--')
  return marker === invocation.args.length - 2 && invocation.args[marker + 1] === task
}

t.test('each agent gets the task only where its CLI reads the prompt', async (t) => {
  const extra = ['--model', 'some-model']
  for (const spec of BUILT_IN_AGENTS) {
    for (const task of HOSTILE_TASKS) {
      for (const settings of [settingsOf(spec), { ...settingsOf(spec), extraArgs: extra }]) {
        const tool = new AgentTool(spec, settings, {}, undefined)
        const invocation = tool.invocation(task)
        const what = `${spec.agent}${settings.extraArgs.length > 0 ? ' with extra args' : ''}, ${JSON.stringify(task)}`
        t.ok(
          takesAsPrompt(invocation, task, tool.invocation('an ordinary task')), `${what}: ${JSON.stringify(invocation)}`
        )
      }
    }
  }
})

/**
 * What a stand-in echoed back: the prompt it read and the argv it was given (each prints them, whatever report format
 * its CLI has); nothing when it did something else (printed its help, say).
 */
function echoed(result: RunResult): { prompt?: string; argv?: string[] } {
  const line = result.output.split('\n').find((candidate) => candidate.startsWith('{"agent"'))
  return line === undefined ? {} : JSON.parse(line)
}

for (const spec of BUILT_IN_AGENTS) {
  const tool = toolNameOf(spec)
  t.test(`${tool}: through the service, each task reaches the stand-in as its prompt`, async (t) => {
    const log = join(tempDir(t), 'starts.log')
    const app = await build(t, {}, standInEnv({ STAND_IN_LOG: log }))
    const starts = () =>
      (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter((line) => line.includes('"argv"')).length : 0)
    for (const task of HOSTILE_TASKS) {
      // Batch: the JSON answer; live: an NDJSON stream. The same argv either way.
      for (const live of [false, true]) {
        const what = `${live ? 'live' : 'batch'}, ${JSON.stringify(task)}`
        const before = starts()
        const response = await app.inject({
          method: 'POST',
          url: `/tools/${tool}`,
          payload: { task },
          headers: live ? { accept: 'application/x-ndjson' } : {}
        })
        t.equal(response.statusCode, 200, `${what}: ran`)
        const result = live
          ? (parseNdjson(response.body).at(-1) as { result: RunResult }).result
          : response.json<RunResult>()
        t.equal(result.ok, true, `${what}: its CLI took it`)
        const received = echoed(result)
        t.equal(received.prompt, task, `${what}: the prompt, byte for byte`)
        t.same(
          received.argv, new AgentTool(spec, settingsOf(spec), {}, undefined).invocation(task).args,
          `${what}: the argv the spec builds`
        )
        t.equal(starts(), before + 1, `${what}: one agent started`)
      }
    }
  })
}

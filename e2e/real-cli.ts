import { execFileSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { Test } from 'tap'
import {
  call, cancelRun, createRun, parseNdjson, processesLeft, processesMatching, settled, startServer, until
} from '../test/helpers/index.js'
import { fromRoot } from '../test/helpers/root.js'
import type { Step } from '#src/schemas/steps.js'
import type { RunLimits } from '#src/schemas/limits.js'
import type { RunParams } from '#src/schemas/run.js'
import type { ToolName } from '../test/helpers/api.js'
import { startAnthropicServer } from '../test/helpers/model-servers/anthropic.js'
import { startGeminiServer } from '../test/helpers/model-servers/gemini.js'
import { startChatServer } from '../test/helpers/model-servers/openai-chat.js'
import { startResponsesServer } from '../test/helpers/model-servers/openai-responses.js'
import type { ModelTurn, ScriptedModelServer } from '../test/helpers/model-servers/scripted-server.js'
import { CLAUDE_VERSION, claudeOffline } from '../test/helpers/real-clis/claude.js'
import { CODEX_VERSION, codexOffline } from '../test/helpers/real-clis/codex.js'
import { GEMINI_VERSION, geminiOffline } from '../test/helpers/real-clis/gemini.js'
import { OPENCODE_VERSION, opencodeOffline } from '../test/helpers/real-clis/opencode.js'
import { npmTool } from '../test/helpers/npm-tool.js'
import { runThrough, SURFACES, type Surface } from '../test/helpers/surfaces.js'
import { directoryOf, realUser, type RealUser } from '../test/helpers/users.js'
import { callerGit } from '../test/workspaces/repos.js'
import { TaskState } from '@a2a-js/sdk'
import { a2aClient, answerOf, sendMessage, userMessage } from '../test/helpers/a2a.js'

/** A real agent CLI as the suite drives it: where it comes from, the model server it speaks to, how it is set up. */
export interface RealCli {
  agent: 'claude' | 'codex' | 'gemini' | 'opencode'
  pkg: string
  version: string
  startModel: (turns: readonly ModelTurn[]) => Promise<ScriptedModelServer>
  /** Writes its config under `home` and returns the variables that point it at `modelUrl` and keep it offline. */
  offline: (home: string, modelUrl: string) => Record<string, string>
  /** The model its offline configuration serves, as a run names it. */
  model: string
  /** Another model it may be asked for offline, and how its requests to the model server name it. */
  otherModel: { asked: string; sent: string }
}

export const REAL_CLIS: Record<RealCli['agent'], RealCli> = {
  claude: {
    agent: 'claude',
    pkg: '@anthropic-ai/claude-code',
    version: CLAUDE_VERSION,
    startModel: startAnthropicServer,
    offline: claudeOffline,
    model: 'claude-opus-5-5',
    otherModel: { asked: 'claude-sonnet-e2e', sent: 'claude-sonnet-e2e' }
  },
  codex: {
    agent: 'codex',
    pkg: '@openai/codex',
    version: CODEX_VERSION,
    startModel: startResponsesServer,
    offline: codexOffline,
    model: 'gpt-5.5',
    otherModel: { asked: 'gpt-5.4', sent: 'gpt-5.4' }
  },
  gemini: {
    agent: 'gemini',
    pkg: '@google/gemini-cli',
    version: GEMINI_VERSION,
    startModel: startGeminiServer,
    offline: geminiOffline,
    model: 'gemini-2.5-flash',
    otherModel: { asked: 'gemini-2.5-pro', sent: 'gemini-2.5-pro' }
  },
  opencode: {
    agent: 'opencode',
    pkg: 'opencode-ai',
    version: OPENCODE_VERSION,
    startModel: startChatServer,
    offline: opencodeOffline,
    model: 'scripted/scripted-model',
    otherModel: { asked: 'scripted/scripted-other', sent: 'scripted-other' }
  }
}

/**
 * The accounts agents run as: one whose sudo needs a password, one whose sudo does not (and who runs the non-root
 * service).
 */
const users = () => ({ nopasswd: realUser('ar-e2e', 'nopasswd'), password: realUser('ar-e2e-pw', 'password') })

/** Every string inside a JSON value: where a conversation holds its user's text, whatever the protocol's shape. */
function stringsIn(value: unknown): string[] {
  if (typeof value === 'string') return [value]
  if (value === null || typeof value !== 'object') return []
  return Object.values(value).flatMap(stringsIn)
}

/** Edits in the directory it runs in: a file added, one modified; and says where it ran. */
const EDIT_SCRIPT: ModelTurn[] = [
  { run: 'printf "edited by the agent\\n" > notes.txt && echo more >> README.md && pwd' }, { say: 'ALL DONE' }
]

/** A repository of the caller's, shared with the agents' user as an operator would (its owner here). */
function callersRepository(t: Test, user: RealUser): string {
  const repo = join(directoryOf(t, user), 'repo')
  mkdirSync(repo)
  callerGit(repo, 'init', '-q', '-b', 'main')
  writeFileSync(join(repo, 'README.md'), 'hello\n')
  callerGit(repo, 'add', '-A')
  callerGit(repo, 'commit', '-q', '-m', 'first')
  execFileSync('chown', ['-R', `${user.uid}:${user.gid}`, repo])
  return repo
}

/** A command the test can find in the process table by a number no other process has: `sleep <seconds>.<random>`. */
function longCommand(seconds: number): { marker: string; command: string } {
  const marker = `sleep ${seconds}.${String(Math.floor(Math.random() * 1e6)).padStart(6, '0')}1`
  // Through sh: claude refuses a tool call that starts with a long `sleep`.
  return { marker, command: `sh -c 'exec ${marker}'` }
}

interface Service {
  base: string
  model: ScriptedModelServer
  tool: ToolName
  bin: string
  user: RealUser
}

/**
 * The agent's environment as an operator would give it: a PATH with its CLI, a locale, and the variables that point
 * it at the scripted model; nothing else of this machine's (no proxy, no key).
 */
function agentEnvironment(
  cli: RealCli, bin: string, home: string, modelUrl: string, user: RealUser
): NodeJS.ProcessEnv {
  const own = cli.offline(home, modelUrl)
  // The CLIs write their state under HOME as the user they run as.
  execFileSync('chown', ['-R', `${user.uid}:${user.gid}`, home])
  return { PATH: `${dirname(bin)}:/usr/local/bin:/usr/bin:/bin`, LANG: 'C.UTF-8', HOME: home, ...own }
}

interface ServiceOptions {
  /** Whose sudo rights the agent has (the account it runs as). */
  sudo?: 'nopasswd' | 'password'
  /** Run the service itself as that account, without AGENT_USER, rather than as root with AGENT_USER. */
  nonRootService?: boolean
  /** The service's own settings beyond the suite's (CLAUDE_PERMISSION_MODE…). */
  settings?: Record<string, string>
}

/**
 * A service (root with AGENT_USER, or non-root) running the real CLI against a model server following `turns`. Out of
 * this process and untraced, as `npm start` runs it: tap would otherwise load its own hooks into every Node agent.
 */
async function serviceFor(
  t: Test, cli: RealCli, turns: readonly ModelTurn[], options: ServiceOptions = {}
): Promise<Service> {
  const user = users()[options.sudo ?? 'nopasswd']
  const model = await cli.startModel(turns)
  t.teardown(() => model.close())
  const bin = await npmTool(cli.pkg, cli.version, cli.agent)
  const tool = `${cli.agent}_run` as ToolName
  const upper = cli.agent.toUpperCase()
  const settings = {
    [`${upper}_BIN`]: bin,
    [`MAX_${upper}_AGENTS`]: '1',
    AGENT_CONTAINMENT: 'auto',
    AGENT_WORKDIR: directoryOf(t, user),
    AGENT_KILL_GRACE_MS: '1000',
    ...options.settings
  }
  // The CLIs write their state under the user's real home either way: that is where HOME points as AGENT_USER.
  const home = execFileSync('getent', ['passwd', user.name], { encoding: 'utf8' }).split(':')[5]!
  const env = agentEnvironment(cli, bin, home, model.url, user)
  if (options.nonRootService === true) {
    const data = directoryOf(t, user)
    const { base } = await startServer(t, { ...env, ...settings, DATA_DIR: join(data, 'data') }, {
      cwd: data, user, untraced: true
    })
    return { base, model, tool, bin, user }
  }
  const { base } = await startServer(t, { ...env, ...settings, AGENT_USER: user.name }, { untraced: true })
  return { base, model, tool, bin, user }
}

/** A working directory of the agent's own for one run. */
const workdir = (t: Test, service: Service): string => directoryOf(t, service.user)

/** The tool results the CLI sent back to the model, joined: what its tools printed, as it told the model. */
const toldTheModel = (service: Service): string => service.model.toolResults().join('\n')

/** Runs through a surface and checks the three things every run must show: the answer, the cwd, what the model saw. */
async function runsItsTools(t: Test, service: Service, surface: Surface): Promise<void> {
  const cwd = workdir(t, service)
  const { result } = await runThrough(surface, service.base, service.tool, {
    task: `e2e ${surface}`, cwd, timeout: 300
  })
  t.match(
    result, { ok: true, exit_code: 0, timed_out: false, stop_reason: null }, `${surface}: the run succeeded`, { result }
  )
  t.match(result.output, /ALL DONE/, `${surface}: the agent's final answer`)
  t.equal(readFileSync(join(cwd, 'where.txt'), 'utf8').trim(), cwd, `${surface}: its tool ran in cwd`)
  t.match(
    toldTheModel(service), new RegExp(`tool-said-hello[\\s\\S]*${service.user.name}`),
    `${surface}: the model got the tool's output, run as ${service.user.name}`
  )
}

const HELLO_SCRIPT: ModelTurn[] = [{ run: 'pwd > where.txt; echo tool-said-hello; id -un' }, { say: 'ALL DONE' }]

/**
 * Two commands, one printing and succeeding, one printing nothing and failing: what steps must tell apart. (Not
 * `test -e`: claude reads its exit 1 as "Condition is false", no error, and tells no code.)
 */
const STEPS_SCRIPT: ModelTurn[] = [{ run: 'echo step-one' }, { run: "sh -c 'exit 3'" }, { say: 'ALL DONE' }]

/**
 * What the CLI printed in a run of STEPS_SCRIPT, kept as the parsers' fixture (test/agents/recorded-steps.test.ts) when
 * RECORD_STEP_FIXTURES=1: what the live output carried, stdout and stderr as the service received them.
 */
const recordedStream = (name: string): string => fromRoot(`test/fixtures/streams/${name}.out`)

type CommandStep = Extract<Step, { kind: 'command' }>

/** A command whose output is not its own text: found in a conversation, it is the tool's result, not its call. */
const FOLLOWED_COMMAND: ModelTurn = { run: 'echo first-tool-output | tr a-z A-Z' }

/**
 * What a continued session's run is scripted to answer. Its conversation already holds the first run's one tool result,
 * so the due turn is the second (the command is never reached again): one model call, the answer.
 */
const answering = (say: string): ModelTurn[] => [FOLLOWED_COMMAND, { say }]

/**
 * The model call of a follow-up, as the scripted server received it: `earlier` is there in this order, in items
 * before the last, and the last (only) holds `prompt`, the follow-up's task.
 */
function continued(
  t: Test, conversation: unknown[] | undefined, earlier: readonly string[], prompt: string, surface: string
): void {
  if (conversation === undefined) {
    t.fail(`${surface}: the model was never asked`)
    return
  }
  const items = conversation.map((item) => JSON.stringify(item))
  const positions = earlier.map((text) => items.findIndex((item) => item.includes(text)))
  const inOrder = positions.every(
    (index, i) => index >= 0 && index < items.length - 1 && (i === 0 || index > positions[i - 1]!)
  )
  t.ok(
    inOrder, `${surface}: the model got the conversation so far, in order: ${earlier.join(', ')}`, { positions, items }
  )
  t.equal(
    items.findIndex((item) => item.includes(prompt)), items.length - 1, `${surface}: and the new task, last`, { items }
  )
}

/** The long command is running: the agent's tool reached it. */
const commandRunning = (marker: string) =>
  until(() => processesMatching(marker).length, (count) => count > 0, 120_000, `${marker} to run`)

/** Nothing of the run is left: the command, its CLI, the slot. */
async function nothingLeft(t: Test, service: Service, marker: string): Promise<void> {
  t.same(await processesLeft(marker), [], 'the tool’s command is gone')
  t.same(await processesLeft(dirname(dirname(service.bin))), [], `no ${service.tool} process left`)
  const { body } = await call(service.base, 'GET', '/tools') as { body: { tools: Array<{ name: string }> } }
  t.match(body.tools.find((tool) => tool.name === service.tool), { in_use: 0, free: 1 }, 'the slot is back')
}

/** Every promise, for one real CLI. */
export function provePromises(t: Test, cli: RealCli): void {
  t.test('every surface: its tools run in cwd as AGENT_USER, the model sees their output, ' +
    'the answer comes back', async (t) => {
    const service = await serviceFor(t, cli, HELLO_SCRIPT)
    for (const surface of SURFACES) await runsItsTools(t, service, surface)
    const ready = await (await fetch(`${service.base}/readyz`)).json() as {
      agents: Array<{ tool: string; version: string | null; problem: string | null }>
    }
    t.match(
      ready.agents.find((agent) => agent.tool === service.tool),
      { version: new RegExp(cli.version.replaceAll('.', '\\.')), problem: null },
      'ready: found, its version, nothing in the way (as AGENT_USER, not root)'
    )
  })

  t.test('steps: each command the agent ran is a started and a completed step, ' +
    'with the exit code its CLI tells', async (t) => {
    const service = await serviceFor(t, cli, STEPS_SCRIPT)
    const { live, result } = await runThrough('ndjson', service.base, service.tool, {
      task: 'e2e steps', cwd: workdir(t, service), timeout: 300
    })
    t.match(result, { ok: true, output: /ALL DONE/ })
    const events = parseNdjson(live)
    if (process.env['RECORD_STEP_FIXTURES'] === '1') {
      writeFileSync(
        recordedStream(cli.agent), events.flatMap((event) => (event.type === 'output' ? [event.data] : [])).join('')
      )
    }
    const steps = events.flatMap((event) => (event.type === 'step' ? [event.step] : []))
    const commands = steps.filter((step): step is CommandStep => step.kind === 'command')
    const ends = commands.filter((step) => step.phase === 'completed')
    // gemini tells a command's exit code only when the command printed nothing (docs/agents.md).
    const ran = [
      { command: /echo step-one/, exit_code: cli.agent === 'gemini' ? null : 0 }, { command: /exit 3/, exit_code: 3 }
    ]
    t.match(ends, ran, 'each command, in order, with its exit code', { steps })
    t.equal(ends.length, 2)
    for (const end of ends) {
      t.ok(
        commands.some((step) => step.phase === 'started' && step.call_id === end.call_id),
        `${end.command}: its start came first`
      )
    }
    t.ok(
      steps.some((step) => step.kind === 'message' && step.text.includes('ALL DONE')), 'the answer is a message step'
    )
    t.ok(steps.some((step) => step.kind === 'usage'), 'and the tokens it used')
    const summary = { commands: ran, denied: [] }
    t.match(
      result, { session_id: String, usage: { input_tokens: Number }, steps_summary: summary },
      'its result says the same'
    )
    t.equal(result.steps_summary?.commands.length, 2)

    // Not followed: the same structured output, so the same summary in the JSON answer.
    const sync = await runThrough('json', service.base, service.tool, {
      task: 'e2e steps', cwd: workdir(t, service), timeout: 300
    })
    t.match(
      sync.result, { ok: true, session_id: String, usage: { input_tokens: Number }, steps_summary: summary },
      'a synchronous run\'s result says what was done', { result: sync.result }
    )
    t.equal(sync.result.steps_summary?.commands.length, 2)
  })

  t.test('follow-up: a run resuming the session_id continues the conversation (REST, then MCP): ' +
    'the model gets it all, the new task last', async (t) => {
    const service = await serviceFor(t, cli, answering('ANSWER-ONE'))
    const first = await runThrough('json', service.base, service.tool, {
      task: 'first task MARKER-ALPHA', cwd: workdir(t, service), timeout: 300
    })
    t.match(
      first.result, { ok: true, output: /ANSWER-ONE/, session_id: String },
      'the first run ran its command and answered', { result: first.result }
    )
    t.match(toldTheModel(service), /FIRST-TOOL-OUTPUT/, 'the model got its output')
    const session = first.result.session_id!
    // No cwd: the follow-ups run in the session's (gemini finds its sessions by directory, opencode hangs elsewhere).
    // A task that reads as a flag stays the task.
    service.model.rescript(answering('ANSWER-TWO'))
    let since = service.model.requests.length
    const second = await runThrough('json', service.base, service.tool, {
      task: '--help second task MARKER-BETA', resume: session, timeout: 300
    })
    t.match(
      second.result, { ok: true, output: /ANSWER-TWO/, session_id: session }, 'REST: the same session went on',
      { result: second.result }
    )
    continued(
      t, service.model.conversations(since)[0], ['MARKER-ALPHA', 'FIRST-TOOL-OUTPUT', 'ANSWER-ONE'], 'MARKER-BETA',
      'REST'
    )

    service.model.rescript(answering('ANSWER-THREE'))
    since = service.model.requests.length
    const third = await runThrough('mcp', service.base, service.tool, {
      task: 'third task MARKER-GAMMA', resume: session, timeout: 300
    })
    t.match(
      third.result, { ok: true, output: /ANSWER-THREE/, session_id: session }, 'MCP: the same session went on',
      { result: third.result }
    )
    const earlier = ['MARKER-ALPHA', 'FIRST-TOOL-OUTPUT', 'ANSWER-ONE', 'MARKER-BETA', 'ANSWER-TWO']
    continued(t, service.model.conversations(since)[0], earlier, 'MARKER-GAMMA', 'MCP')
  })

  t.test('A2A: a message in an earlier task’s context continues its session: the model gets it all, ' +
    'the new task last', async (t) => {
    const service = await serviceFor(t, cli, answering('ANSWER-ONE'))
    const client = await a2aClient(service.base, `/a2a/${service.tool}`, '')
    const first = await sendMessage(client, userMessage('first task MARKER-ALPHA', {
      cwd: workdir(t, service), timeout: 300
    }))
    t.equal(first.status?.state, TaskState.TASK_STATE_COMPLETED, 'the first task ran its command and answered')
    t.match(answerOf(first), /ANSWER-ONE/)
    service.model.rescript(answering('ANSWER-TWO'))
    const since = service.model.requests.length
    // No cwd: the context's session knows where it ran.
    const second = await sendMessage(client, {
      ...userMessage('--help second task MARKER-BETA', { timeout: 300 }), contextId: first.contextId
    })
    t.match(second, { contextId: first.contextId, status: { state: TaskState.TASK_STATE_COMPLETED } })
    t.match(answerOf(second), /ANSWER-TWO/, 'the same session went on')
    const earlier = ['MARKER-ALPHA', 'FIRST-TOOL-OUTPUT', 'ANSWER-ONE']
    continued(t, service.model.conversations(since)[0], earlier, 'MARKER-BETA', 'A2A')
  })

  t.test('the deadline in the middle of a long command: the command and the CLI are gone, ' +
    'the slot is back', async (t) => {
    const { marker, command } = longCommand(290)
    const service = await serviceFor(t, cli, [{ run: command }, { say: 'unreachable' }])
    const result = await runThrough('json', service.base, service.tool, {
      task: 'e2e deadline', cwd: workdir(t, service), timeout: 25
    })
    t.match(
      result.result, { ok: false, timed_out: true, stop_reason: 'timeout' }, 'stopped at its deadline', { result }
    )
    await nothingLeft(t, service, marker)
  })

  t.test('DELETE in the middle of a long command: cancelled, the command and the CLI are gone, the slot is back; ' +
    'the task reached the model byte for byte, on no command line', async (t) => {
    const { marker, command } = longCommand(291)
    const service = await serviceFor(t, cli, [{ run: command }, { say: 'unreachable' }])
    // Blanks a CLI could trim, quotes opencode would add to a word, an option, a Windows line end.
    const taskMarker = `TASK-MARKER-${randomUUID()}`
    const task = `  --help "quoted" two words ${taskMarker}\r\n`
    const { id } = await createRun(service.base, { tool: service.tool, task, cwd: workdir(t, service), timeout: 300 })
    await commandRunning(marker)
    t.same(processesMatching(taskMarker), [], 'while the CLI and its command run, no command line holds the task')
    t.ok(
      service.model.conversations().some((conversation) => stringsIn(conversation).includes(task)),
      'the model got the task as it was given', { conversations: service.model.conversations() }
    )
    await cancelRun(service.base, id)
    t.match(await settled(service.base, id, 30_000), { status: 'cancelled', result: { stop_reason: 'cancelled' } })
    await nothingLeft(t, service, marker)
  })

  t.test('what its tools leave running in the background is gone once the run ends', async (t) => {
    const { marker, command } = longCommand(292)
    // Redirected: gemini and opencode wait for every holder of the tool's output to close it.
    const service = await serviceFor(t, cli, [
      { run: `${command} >/dev/null 2>&1 & echo started-in-background` }, { say: 'ALL DONE' }
    ])
    const { result } = await runThrough('json', service.base, service.tool, {
      task: 'e2e background', cwd: workdir(t, service), timeout: 300
    })
    t.match(result, { ok: true, output: /ALL DONE/ }, 'the run ended well', { result })
    t.match(toldTheModel(service), /started-in-background/, 'the tool started it')
    await nothingLeft(t, service, marker)
  })

  t.test('sudo that needs a password: reported in the JSON answer, naming the user, ' +
    'and the agent read why', async (t) => {
    const service = await serviceFor(
      t, cli, [{ run: 'sudo true; echo sudo-exit=$?' }, { say: 'ALL DONE' }], { sudo: 'password' }
    )
    const { result } = await runThrough('json', service.base, service.tool, {
      task: 'e2e sudo', cwd: workdir(t, service), timeout: 300
    })
    t.match(
      result, { ok: true, timed_out: false, sudo: { status: 'password_required', password_needed: true } },
      'the JSON answer says so', { result }
    )
    t.match(result.sudo.message, new RegExp(`l’utilisateur « ${service.user.name} » sur l’hôte`))
    const told = toldTheModel(service)
    t.match(told, /sudo-exit=1/, 'sudo failed at once')
    t.match(
      told, new RegExp(`agent-runner: sudo needs a password for user ${service.user.name}`), 'and the agent read why'
    )
  })

  t.test('passwordless sudo: the command runs as root and nothing is reported', async (t) => {
    const service = await serviceFor(t, cli, [{ run: 'sudo id -u; echo sudo-exit=$?' }, { say: 'ALL DONE' }])
    const { result } = await runThrough('json', service.base, service.tool, {
      task: 'e2e sudo', cwd: workdir(t, service), timeout: 300
    })
    t.match(
      result, { ok: true, sudo: { status: 'passwordless', password_needed: false, message: null } },
      'nothing to report', { result }
    )
    t.match(toldTheModel(service), /^(Output: )?0$[\s\S]*sudo-exit=0/m, 'run as root', { told: toldTheModel(service) })
  })

  t.test('a worktree run: what its tool wrote comes back as the changeset, the caller’s checkout untouched',
    async (t) => {
      const user = users().nopasswd
      const worktrees = join(directoryOf(t, user), 'worktrees')
      const service = await serviceFor(t, cli, EDIT_SCRIPT, { settings: { WORKTREES_DIR: worktrees } })
      const repo = callersRepository(t, user)
      const { result } = await runThrough('json', service.base, service.tool, {
        task: 'e2e worktree', cwd: repo, timeout: 300, workspace: 'worktree'
      })
      t.match(result, { ok: true, output: /ALL DONE/ }, 'the run succeeded', { result })
      t.same(result.changes?.files, [
        { path: 'README.md', status: 'modified', additions: 1, deletions: 0, binary: false },
        { path: 'notes.txt', status: 'added', additions: 1, deletions: 0, binary: false }
      ], 'the files its tool wrote')
      t.match(result.changes?.diff, /^\+edited by the agent$/m)
      t.equal(callerGit(repo, 'status', '--porcelain', '--untracked-files=all'), '', 'the caller’s tree is as it was')
      // Each of the four CLIs leaves a session to continue: its worktree stays, for a follow-up to continue in.
      t.match(result, { session_id: String, changes: { worktree: new RegExp(`^${worktrees}/[0-9a-f-]{36}$`) } })
      t.same(readdirSync(worktrees).map((name) => join(worktrees, name)), [result.changes?.worktree], 'kept for it')
      t.match(toldTheModel(service), result.changes?.worktree ?? 'no worktree', 'its tool ran in the worktree')
    })

  t.test('output_schema: the model is asked after the task, and the object its answer ends with is structured_output',
    async (t) => {
      const service = await serviceFor(t, cli, [{ say: 'Counted them.\n{"verdict":"pass","count":2}' }])
      const schema = {
        type: 'object',
        properties: { verdict: { enum: ['pass', 'fail'] }, count: { type: 'integer' } },
        required: ['verdict', 'count']
      }
      const { result } = await runThrough('json', service.base, service.tool, {
        task: 'e2e output schema', cwd: workdir(t, service), timeout: 300, output_schema: schema
      })
      t.match(result, { ok: true, error: null, structured_output: { verdict: 'pass', count: 2 } }, { result })
      const asked = JSON.stringify(service.model.conversations().at(-1))
      t.match(asked, 'e2e output schema', 'the task reached the model')
      t.match(asked, JSON.stringify(JSON.stringify(schema)).slice(1, -1), 'and the schema after it')
      // Missed: an object that breaks the schema, then none at all.
      const misses = [['Counted them.\n{"verdict":"maybe","count":2}', 1], ['Counted them.', 0]] as const
      for (const [answer, errors] of misses) {
        service.model.rescript([{ say: answer }])
        const missed = (await runThrough('json', service.base, service.tool, {
          task: 'e2e output schema missed', cwd: workdir(t, service), timeout: 300, output_schema: schema
        })).result
        t.match(missed, { ok: false, structured_output: null, error: { code: 'OUTPUT_SCHEMA_MISMATCH' } }, answer)
        t.equal(missed.error?.schema_errors.length, errors, `${errors} schema error(s)`)
      }
    })

  t.test('model: the one a run names is the one its CLI asks the model server for', async (t) => {
    const service = await serviceFor(t, cli, [{ say: 'ALL DONE' }])
    const { asked, sent } = cli.otherModel
    const since = service.model.requests.length
    const { result } = await runThrough('json', service.base, service.tool, {
      task: 'e2e model', cwd: workdir(t, service), timeout: 300, model: asked
    })
    t.match(result, { ok: true, output: /ALL DONE/ }, { result })
    const requests = service.model.requests.slice(since)
    const naming = (request: { url: string; body: unknown }) =>
      request.url.includes(`/${sent}:`) || (request.body as { model?: unknown } | undefined)?.model === sent
    t.ok(requests.some(naming), `a request names ${sent}`, { requests: requests.map((request) => request.url) })
    if (cli.agent === 'claude' || cli.agent === 'gemini') {
      t.equal(result.usage?.model, sent, 'the model it says it used')
    }
  })

  t.test('limits: a two-call script held to one turn never gets its answer; one token is past at once; ' +
    'a dollar limit from the CLI’s cost or the price table', async (t) => {
    const prices = join(directoryOf(t, users().nopasswd), 'prices.json')
    // A dollar a token: any call is past half a dollar. Claude prices its own models: none for it here.
    const price = { input_usd_per_mtok: 1e6, output_usd_per_mtok: 1e6 }
    writeFileSync(prices, JSON.stringify(cli.agent === 'claude' ? {} : { [cli.model]: price }))
    // Held to one turn, the answer never comes: a CLI quick to run its second call (opencode tells a call once it ran,
    // then asks at once) waits for the service, seeing that second turn, to stop it (a CLI not stopped waits for its
    // deadline instead).
    const heldAnswer = STEPS_SCRIPT.map((turn) => ('say' in turn ? { ...turn, held: true } : turn))
    const service = await serviceFor(t, cli, heldAnswer, { settings: { MODEL_PRICES_FILE: prices } })
    const run = async (limits: RunLimits, more: Partial<RunParams> = {}) => (await runThrough('json', service.base,
      service.tool, { task: 'e2e limits', cwd: workdir(t, service), timeout: 300, limits, ...more })).result
    const turns = await run({ max_turns: 1 })
    t.match(turns, { ok: false, stop_reason: 'max_turns' }, { result: turns })
    // Claude stops itself before its second response; the service stops the others as theirs begins.
    t.equal(turns.steps_summary!.turns, cli.agent === 'claude' ? 1 : 2, 'the turns seen')
    if (cli.agent === 'claude') {
      t.ok(turns.command.includes('--max-turns=1'))
      // As its stand-in says it (test/fixtures/agents/claude.mjs): an error result, exit 1.
      t.match(turns, { agent_report: { subtype: 'error_max_turns', is_error: true }, exit_code: 1 },
        'claude stopped itself')
    }
    // codex and gemini tell their usage only as they end: their answer is what ends these two.
    service.model.rescript(STEPS_SCRIPT)
    const tokens = await run({ max_tokens: 1 })
    t.match(tokens, { ok: false, stop_reason: 'max_tokens', usage: { input_tokens: Number } }, { result: tokens })
    // Claude's cost is its result's total_cost_usd; the others’ the table's, for the model named.
    const cost = await run({ max_cost_usd: cli.agent === 'claude' ? 0.000_000_1 : 0.5 }, { model: cli.model })
    t.match(cost, { ok: false, stop_reason: 'max_cost', usage: { cost_usd: Number } }, { result: cost })
    t.ok(cost.usage!.cost_usd! > (cli.agent === 'claude' ? 0.000_000_1 : 0.5), `cost ${String(cost.usage!.cost_usd)}`)
  })

  t.test('a service that is not root runs it the same', async (t) => {
    const service = await serviceFor(t, cli, HELLO_SCRIPT, { nonRootService: true })
    await runsItsTools(t, service, 'json')
    const ready = await (await fetch(`${service.base}/readyz`)).json() as {
      agents: Array<{ tool: string; version: string | null; problem: string | null }>
    }
    // Its version probe may lapse (5 s) on a loaded machine: found, with nothing in the way, is what this adds.
    t.match(ready.agents.find((agent) => agent.tool === service.tool), { path: service.bin, problem: null })
  })
}

/**
 * What claude does with a call its permission mode refuses (2.1.332, read here): a `system` `permission_denied` line
 * (`decision_reason_type: "mode"` in dontAsk, none in default), the refusal as an error tool_result whose
 * `tool_result_meta` says `reject`, and the call in the result line's `permission_denials`; exit 0, no error.
 * `touch`: claude lets read-only commands (echo, ls) run in either mode.
 */
export function proveClaudeDenials(t: Test): void {
  for (const [mode, fixture] of [['dontAsk', 'claude-denied'], ['default', 'claude-denied-default']] as const) {
    t.test(`CLAUDE_PERMISSION_MODE=${mode}: a refused command is a denied step, ` +
      'and a run whose every call was refused is not ok', async (t) => {
      const service = await serviceFor(t, REAL_CLIS.claude, [{ run: 'touch made-by-claude' }, { say: 'ALL DONE' }], {
        settings: { CLAUDE_PERMISSION_MODE: mode }
      })
      const cwd = workdir(t, service)
      const { live, result } = await runThrough('ndjson', service.base, service.tool, {
        task: 'e2e denied', cwd, timeout: 300
      })
      const events = parseNdjson(live)
      if (process.env['RECORD_STEP_FIXTURES'] === '1') {
        writeFileSync(
          recordedStream(fixture), events.flatMap((event) => (event.type === 'output' ? [event.data] : [])).join('')
        )
      }
      t.notOk(existsSync(join(cwd, 'made-by-claude')), 'the command did not run')
      t.match(toldTheModel(service), /denied|needs approval/, 'claude told the model it was refused', {
        told: toldTheModel(service)
      })
      const ends = events.flatMap((event) => (
        event.type === 'step' && event.step.kind === 'command' && event.step.phase === 'completed' ? [event.step] : []
      ))
      t.match(
        ends, [{ command: 'touch made-by-claude', status: 'denied', exit_code: null }], 'one denied command step',
        { events }
      )
      t.equal(ends.length, 1, 'counted once, whatever else repeats it')
      t.match(result, {
        ok: false,
        exit_code: 0,
        agent_report: { is_error: false },
        output: /ALL DONE/,
        steps_summary: {
          commands: [{ command: 'touch made-by-claude', status: 'denied' }],
          denied: [{ kind: 'command', name: 'touch made-by-claude' }]
        }
      }, 'claude says success; every call refused, the run is not ok', { result })
      t.equal(result.steps_summary?.denied.length, 1)
    })
  }
}

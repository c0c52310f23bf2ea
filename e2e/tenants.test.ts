import t, { type Test } from 'tap'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { crossableDataDir, refused, runTool, startServer, tempDir } from '../test/helpers/index.js'
import { npmTool } from '../test/helpers/npm-tool.js'
import type { ModelTurn } from '../test/helpers/model-servers/scripted-server.js'
import { runThrough } from '../test/helpers/surfaces.js'
import { asRoot } from '../test/helpers/users.js'
import { REAL_CLIS, type RealCli } from './real-cli.js'

// The real claude and codex under AGENT_USERS (issue 36): each token's runs as a uid and a HOME of its own, the CLIs'
// offline configuration laid from a template home, a follow-up continuing its session in its token's home only.

const ALICE = { authorization: 'Bearer secret-a' }
const BOB = { authorization: 'Bearer secret-b' }

const skip = !asRoot && 'AGENT_USERS needs root'

/** Who ran the tool: the first turn's command prints its uid, which the model gets back as the tool's result. */
const script = (answer: string): ModelTurn[] => [{ run: 'echo UID-$(id -u)-END' }, { say: answer }]

async function tenantsOf(t: Test, cli: RealCli): Promise<void> {
  const model = await cli.startModel(script('ANSWER-ONE'))
  t.teardown(() => model.close())
  const bin = await npmTool(cli.pkg, cli.version, cli.agent)
  const template = tempDir(t)
  // The operator's logged-in CLI, as a home: what offline() writes there is what each token's home gets.
  const { CODEX_HOME: _theTemplates, ...variables } = cli.offline(template, model.url)
  const dataDir = crossableDataDir(t)
  const upper = cli.agent.toUpperCase()
  const { base } = await startServer(t, {
    PATH: `${dirname(bin)}:/usr/local/bin:/usr/bin:/bin`,
    LANG: 'C.UTF-8',
    ...variables,
    [`${upper}_BIN`]: bin,
    API_TOKENS: 'alice:secret-a,bob:secret-b',
    AGENT_USERS: '62000-62009',
    AGENT_HOME_TEMPLATE: template,
    DATA_DIR: dataDir,
    AGENT_CONTAINMENT: 'auto',
    AGENT_KILL_GRACE_MS: '1000'
  }, { untraced: true })
  const tool = `${cli.agent}_run` as const
  /** The uid the last run's tool printed, as the model was told it in the requests since `since`. */
  const uidOf = (since: number): number => {
    const told = [...JSON.stringify(model.conversations(since)).matchAll(/UID-(\d+)-END/g)]
    return Number(told.at(-1)?.[1])
  }

  const first = await runTool(base, tool, { task: 'first task MARKER-ALPHA', timeout: 300 }, ALICE)
  t.match(first, { ok: true, output: /ANSWER-ONE/, session_id: String }, 'alice’s run answered', { result: first })
  const alice = uidOf(0)
  t.ok(alice >= 62000 && alice <= 62009, `alice’s tool ran as her uid (${alice})`)
  const home = join(dataDir, 'homes', String(alice))
  t.equal(statSync(home).mode & 0o777, 0o700)
  t.ok(readdirSync(home).length > 0, 'the CLI kept its state in alice’s home')

  model.rescript(script('ANSWER-BOB'))
  const bobsStart = model.requests.length
  const bobs = await runTool(base, tool, { task: 'bob’s task', timeout: 300 }, BOB)
  t.match(bobs, { ok: true, output: /ANSWER-BOB/ })
  const bob = uidOf(bobsStart)
  t.ok(bob >= 62000 && bob <= 62009 && bob !== alice, `bob’s ran as another uid (${bob})`)
  t.match(
    await refused(base, tool, { task: 'show me', resume: first.session_id }, BOB),
    { status: 404, body: { code: 'SESSION_NOT_FOUND' } }, 'bob cannot continue alice’s session'
  )

  // The conversation has one tool result already: the due turn is the answer.
  model.rescript(script('ANSWER-TWO'))
  const since = model.requests.length
  const followUp = await runThrough(
    'json', base, tool, { task: '--help second task MARKER-BETA', resume: first.session_id!, timeout: 300 }, ALICE
  )
  t.match(
    followUp.result, { ok: true, output: /ANSWER-TWO/, session_id: first.session_id },
    'alice continued her session in her home', { result: followUp.result }
  )
  const conversation = JSON.stringify(model.conversations(since)[0] ?? [])
  t.match(conversation, /MARKER-ALPHA[\s\S]*MARKER-BETA/, 'the model got her conversation, then the new task')
  t.ok(existsSync(join(dataDir, 'homes', String(bob))), 'bob has a home of his own')
}

t.test('claude under per-token users', { skip }, (t) => tenantsOf(t, REAL_CLIS.claude))
t.test('codex under per-token users', { skip }, (t) => tenantsOf(t, REAL_CLIS.codex))

import t from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { loadConfig } from '#src/config.js'
import { allocateUid, parseUidRange } from '#src/process/token-users.js'
import { killEveryProcessOf, processesOfUid } from '#src/process/uid-sweep.js'
import {
  build, crossableDataDir, echoed, readPidFile, runTool, scenario, sharedDir, standInEnv, tempDir, TEST_AGENT_ENV_ALLOW,
  until
} from '../helpers/index.js'
import { asRoot, realSudoInstalled } from '../helpers/users.js'

// Two tokens on one service are two Unix users (issue 36, item 1): AGENT_USERS gives each token's agents a uid and a
// HOME of their own, so that alice's agent can neither read, signal nor write bob's processes and files.

const ALICE = { authorization: 'Bearer secret-a' }
const BOB = { authorization: 'Bearer secret-b' }
const TOKENS = { API_TOKENS: 'alice:secret-a,bob:secret-b', ALLOW_SHARED_AGENT_USER: 'false' }
const skip = !asRoot && 'AGENT_USERS needs root'

interface Whoami { uid: number; home: string; user: string }

const whoami = async (app: FastifyInstance, headers: typeof ALICE, options: { cwd?: string } = {}): Promise<Whoami> =>
  JSON.parse(
    (await runTool(app, 'crush_run', { task: scenario.whoami(), ...options }, headers)).output.split('\n')[0]!
  ) as Whoami

/** A space in a stand-in's shell command: its task is split into words at spaces. */
// eslint-disable-next-line no-template-curly-in-string
const IFS = '${IFS}'

/** What an agent's shell did: its exit status, and what it printed. */
async function shell(app: FastifyInstance, headers: typeof ALICE, ...argv: string[]): Promise<string> {
  return (await runTool(app, 'crush_run', { task: scenario.shell(...argv) }, headers)).output
}

t.test('AGENT_USERS is a uid range; uids are allocated once per token and kept', async (t) => {
  t.same(parseUidRange('61000-61999'), { first: 61000, last: 61999 })
  for (const bad of ['0-10', '61999-61000', '61000', 'a-b', '-5-3']) t.throws(() => parseUidRange(bad), /AGENT_USERS/)
  const range = { first: 100, last: 102 }
  const records = { alice: { uid: 101, template: null } }
  t.equal(allocateUid(records, 'alice', range), 101, 'a token keeps its uid')
  t.equal(allocateUid(records, 'bob', range), 100, 'a new one takes the lowest free')
  t.throws(
    () =>
      allocateUid(
        { a: { uid: 100, template: null }, b: { uid: 101, template: null }, c: { uid: 102, template: null } }, 'd',
        range
      ),
    /no uid left for token d/
  )
})

t.test('several tokens whose agents would share one user: ' +
  'refused unless AGENT_USERS or ALLOW_SHARED_AGENT_USER', async (t) => {
  t.throws(
    () => loadConfig({ API_TOKENS: 'alice:a,bob:b' }),
    /2 tokens, and their agents would all run as one user.*AGENT_USERS.*ALLOW_SHARED_AGENT_USER=true/
  )
  t.equal(loadConfig({ API_TOKENS: 'alice:a,bob:b', ALLOW_SHARED_AGENT_USER: 'true' }).apiTokens.length, 2)
  t.equal(loadConfig({ API_TOKENS: 'alice:a' }).apiTokens.length, 1, 'one token shares with nobody')
  t.throws(
    () => loadConfig({ AGENT_HOME_TEMPLATE: '/etc' }), /AGENT_HOME_TEMPLATE is laid into the homes of AGENT_USERS/
  )
})

t.test('each token’s agents run as a uid of its own, in a HOME of its own (0700), ' +
  'the same uid after a restart', { skip }, async (t) => {
  const dataDir = crossableDataDir(t)
  const options = { ...TOKENS, AGENT_USERS: '61500-61509', DATA_DIR: dataDir }
  const app = await build(t, options)
  const alice = await whoami(app, ALICE)
  const bob = await whoami(app, BOB)
  t.not(alice.uid, bob.uid, 'two tokens, two users')
  for (const who of [alice, bob]) {
    t.ok(who.uid >= 61500 && who.uid <= 61509, `uid ${who.uid} from the range`)
    t.equal(who.home, join(dataDir, 'homes', String(who.uid)))
    const home = statSync(who.home)
    t.equal(home.uid, who.uid, 'its home is its own')
    t.equal(home.mode & 0o777, 0o700, 'and nobody else’s to read')
  }
  t.equal(statSync(dataDir).mode & 0o777, 0o711, 'DATA_DIR is crossed to the homes, never listed')
  t.equal(
    echoed(await runTool(app, 'crush_run', { task: 'where am I' }, ALICE)).cwd, join(alice.home, 'workspace'),
    'a run without cwd works in its token’s own workspace'
  )
  await app.close()
  const again = await build(t, { ...options, API_TOKENS: 'carol:secret-c,alice:secret-a,bob:secret-b' })
  t.equal((await whoami(again, ALICE)).uid, alice.uid, 'the same token, the same uid, after a restart')
  const carol = await whoami(again, { authorization: 'Bearer secret-c' })
  t.notOk([alice.uid, bob.uid].includes(carol.uid), 'a token named later gets a user of its own')
})

t.test('alice’s agent cannot read bob’s live environment, signal his agent, or enter his home', { skip }, async (t) => {
  const app = await build(
    t, { ...TOKENS, AGENT_USERS: '61510-61519', MAX_CRUSH_AGENTS: '4', DATA_DIR: crossableDataDir(t) },
    standInEnv({ HOME: '/nonexistent' })
  )
  const bob = await whoami(app, BOB)
  const shared = sharedDir(t)
  const pidFile = join(shared, 'bob.pid')
  const held = runTool(app, 'crush_run', { task: scenario.hold(pidFile) }, BOB)
  const bobsAgent = await readPidFile(pidFile)
  t.match(
    await shell(app, ALICE, 'cat', `/proc/${bobsAgent}/environ`), /Permission denied/,
    'his environment (his task, his run mark) is his'
  )
  t.match(
    await shell(app, ALICE, 'kill', '-9', String(bobsAgent)), /Operation not permitted/,
    'his agent is not alice’s to kill'
  )
  t.match(await shell(app, ALICE, 'ls', bob.home), /Permission denied/, 'his conversations are not hers to read')
  t.match(
    await shell(app, ALICE, 'sh', '-c', `mkdir${IFS}-p${IFS}${bob.home}/.claude`), /Permission denied/,
    'nor to plant a hook in'
  )
  writeFileSync(`${pidFile}.release`, '')
  t.match(await held, { ok: true, output: /released/ }, 'bob’s agent ran to its end')
})

t.test('the template home is laid into each token’s home by its user, again when it changes; ' +
  'one token’s copy is its own', { skip }, async (t) => {
  const template = tempDir(t)
  mkdirSync(join(template, '.claude'))
  writeFileSync(join(template, '.claude', 'settings.json'), '{"model":"operator"}\n', { mode: 0o600 })
  const app = await build(t, {
    ...TOKENS, AGENT_USERS: '61520-61529', AGENT_HOME_TEMPLATE: template, DATA_DIR: crossableDataDir(t)
  })
  const alice = await whoami(app, ALICE)
  const bob = await whoami(app, BOB)
  for (const who of [alice, bob]) {
    const settings = join(who.home, '.claude', 'settings.json')
    t.equal(readFileSync(settings, 'utf8'), '{"model":"operator"}\n')
    t.equal(statSync(settings).uid, who.uid, 'written by the token’s own user')
    t.equal(statSync(settings).mode & 0o777, 0o600, 'with the template’s mode')
    t.equal(statSync(who.home).mode & 0o777, 0o700)
  }
  const planted = '{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"true"}]}]}}'
  await shell(app, ALICE, 'sh', '-c', `echo${IFS}'${planted}'>${alice.home}/.claude/settings.json`)
  t.equal(readFileSync(join(alice.home, '.claude', 'settings.json'), 'utf8'), `${planted}\n`, 'alice changed her own')
  t.equal(
    readFileSync(join(bob.home, '.claude', 'settings.json'), 'utf8'), '{"model":"operator"}\n', 'bob’s is untouched'
  )
  writeFileSync(join(template, '.claude', 'settings.json'), '{"model":"newer"}\n')
  await whoami(app, BOB)
  t.equal(
    readFileSync(join(bob.home, '.claude', 'settings.json'), 'utf8'), '{"model":"newer"}\n',
    'a changed template is laid again'
  )
})

t.test('a DATA_DIR the tokens’ users cannot cross to their homes: the run is refused, ' +
  'saying why', { skip }, async (t) => {
  const app = await build(t, { ...TOKENS, AGENT_USERS: '61550-61559', DATA_DIR: join(tempDir(t), 'data') })
  const answer = await app.inject({ method: 'POST', url: '/tools/crush_run', headers: ALICE, payload: { task: 'x' } })
  t.match(answer.json(), {
    statusCode: 503,
    code: 'AGENT_SPAWN_FAILED',
    message: /cannot be reached by uid 6155\d: every directory above DATA_DIR\/homes must be one others may cross/
  })
})

t.test('what names a CLI’s state directory outside the home is not passed on: ' +
  'each token’s state stays in its home', { skip }, async (t) => {
  const shared = tempDir(t)
  const app = await build(
    t,
    {
      ...TOKENS,
      AGENT_USERS: '61560-61569',
      DATA_DIR: crossableDataDir(t),
      AGENT_ENV_ALLOW: `${TEST_AGENT_ENV_ALLOW},XDG_*,CODEX_HOME`
    },
    standInEnv({ CODEX_HOME: shared, XDG_CONFIG_HOME: shared, XDG_DATA_HOME: shared })
  )
  const seen = JSON.parse(
    (await runTool(app, 'crush_run', { task: scenario.env() }, ALICE)).output.split('\n')[0]!
  ) as Record<string, string>
  t.notOk('CODEX_HOME' in seen || 'XDG_CONFIG_HOME' in seen || 'XDG_DATA_HOME' in seen, 'none reaches the agent')
  t.match(seen, { HOME: /homes\/6156\d$/, USER: 'alice' })
})

t.test('process-group mode: once a token’s last run ends, every process of its uid is gone, ' +
  'however it hid', { skip }, async (t) => {
  // Without cgroups (each run's own would end its daemons with it): what the uid alone gives.
  const app = await build(t, {
    ...TOKENS, AGENT_USERS: '61570-61579', DATA_DIR: crossableDataDir(t), MAX_CRUSH_AGENTS: '4', AGENT_LIMITS: 'off'
  })
  const alice = await whoami(app, ALICE)
  t.teardown(() => killEveryProcessOf(alice.uid))
  t.match((await app.inject({ method: 'GET', url: '/readyz', headers: ALICE })).json().containment, {
    mode: 'process-group', escapes: /every process of the token's uid ends with its last run/
  })
  for (const [name, task] of [
    ['a setsid env -i daemon', scenario.scrubbed], ['a pid hopper', scenario.hopper]
  ] as const) {
    const dir = sharedDir(t)
    t.match(await runTool(app, 'crush_run', { task: task(dir, 0) }, ALICE), { ok: true }, name)
    t.same(await processesOfUid(alice.uid), [], `${name}: nothing of alice’s uid is left when her run answers`)
  }
  // While another of alice's runs lives, what carries no mark could be that run's: it stays until her last run ends.
  const shared = sharedDir(t)
  const pidFile = join(shared, 'held.pid')
  const held = runTool(app, 'crush_run', { task: scenario.hold(pidFile) }, ALICE)
  const heldPid = await readPidFile(pidFile)
  await runTool(app, 'crush_run', { task: scenario.scrubbed(shared, 0) }, ALICE)
  const left = await processesOfUid(alice.uid)
  t.ok(left.includes(heldPid), 'her other run’s agent is untouched')
  t.ok(left.length >= 2, 'and the daemon waits for her last run')
  writeFileSync(`${pidFile}.release`, '')
  await held
  t.same(await processesOfUid(alice.uid), [], 'her last run ended: nothing of her uid is left')
})

t.test('pid-namespace containment switches to the token’s user too, with no passwd entry', { skip }, async (t) => {
  const app = await build(t, {
    ...TOKENS, AGENT_USERS: '61530-61539', AGENT_CONTAINMENT: 'pid-namespace', DATA_DIR: crossableDataDir(t)
  })
  const alice = await whoami(app, ALICE)
  const bob = await whoami(app, BOB)
  t.not(alice.uid, bob.uid)
  t.ok(alice.uid >= 61530 && alice.uid <= 61539)
  t.ok(existsSync(alice.home))
})

t.test('pid-namespace mode: once a token’s last run ends, every process of its uid is gone, even one that never ' +
  'was in a run’s namespace', { skip }, async (t) => {
  const app = await build(t, {
    ...TOKENS,
    AGENT_USERS: '61630-61639',
    AGENT_CONTAINMENT: 'pid-namespace',
    DATA_DIR: crossableDataDir(t),
    AGENT_LIMITS: 'off'
  })
  const alice = await whoami(app, ALICE)
  t.teardown(() => killEveryProcessOf(alice.uid))
  // As a program a repository made git start beside the run would be: alice's uid, in the host's namespace.
  const outside = spawn('setsid', ['sleep', '600'], { uid: alice.uid, gid: alice.uid, stdio: 'ignore', detached: true })
  outside.unref()
  await until(() => processesOfUid(alice.uid), (pids) => pids.length > 0, 10_000, 'alice’s process outside')
  t.match(await runTool(app, 'crush_run', { task: 'hello' }, ALICE), { ok: true })
  t.same(await processesOfUid(alice.uid), [], 'her last run ended: nothing of her uid is left')
})

t.test('sessions stay in the token’s home: bob continues his, alice cannot even see the file', { skip }, async (t) => {
  const app = await build(t, { ...TOKENS, AGENT_USERS: '61540-61549', DATA_DIR: crossableDataDir(t) })
  const first = await runTool(app, 'claude_run', { task: 'bob’s plan' }, BOB)
  const followUp = await runTool(app, 'claude_run', { task: 'go on', resume: first.session_id! }, BOB)
  t.same((echoed(followUp) as ReturnType<typeof echoed> & { earlier: string[] }).earlier, ['bob’s plan'])
  const bob = await whoami(app, BOB)
  t.ok(existsSync(join(bob.home, '.claude-stand-in-sessions', first.session_id!)), 'kept under bob’s HOME')
  t.match(
    await shell(app, ALICE, 'cat', join(bob.home, '.claude-stand-in-sessions', first.session_id!)), /Permission denied/
  )
})

t.test('sudo refuses a token’s own user outright (no passwd entry): the result says unknown_user, ' +
  'not a password to give', { skip: skip || (!realSudoInstalled && 'needs the sudo package') }, async (t) => {
  const app = await build(
    t, { ...TOKENS, AGENT_USERS: '61580-61589', DATA_DIR: crossableDataDir(t), AGENT_LIMITS: 'off' },
    standInEnv({ LANG: 'fr_FR.UTF-8' })
  )
  const body = await runTool(app, 'crush_run', { task: 'hello' }, ALICE)
  t.same(
    body.sudo, { status: 'unknown_user', password_needed: false, message: null }, 'in any language the agent speaks'
  )
})

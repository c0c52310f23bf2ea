import t, { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { toolNameOf } from '#src/agents/spec.js'
import { AgentTool } from '#src/agents/tools.js'
import { loadConfig } from '#src/config.js'
import {
  build, call, createRun, echoed, heldAgent, readPidFile, refused, runTool, scenario, settled, standInEnv, tempDir
} from '../helpers/index.js'

// Follow-ups (issue 28): a run may continue a session an earlier run of the same tool and token reported, where it ran;
// the stand-ins keep their sessions as their CLIs do (under the agent's HOME) and answer with the earlier prompts.

const ALICE = { authorization: 'Bearer secret-a' }
const BOB = { authorization: 'Bearer secret-b' }

/** A service with two callers, whose agents keep their sessions in a HOME of this test's own. */
async function service(
  t: Test, overrides: Record<string, string> = {}
): Promise<{ app: FastifyInstance; log: string }> {
  const log = join(tempDir(t), 'starts.log')
  const app = await build(
    t, { API_TOKENS: 'alice:secret-a,bob:secret-b', ...overrides }, standInEnv({ HOME: tempDir(t), STAND_IN_LOG: log })
  )
  return { app, log }
}

const starts = (log: string): number => {
  try {
    return readFileSync(log, 'utf8').split('\n').filter((line) => line.includes('"argv"')).length
  } catch {
    return 0
  }
}

/** Every agent whose CLI continues a session, with the settings a service with no agent variables gives it. */
const DEFAULTS = new Map(loadConfig({}).agents.map(({ spec, settings }) => [spec.agent, settings]))
const resumable = BUILT_IN_AGENTS.filter((spec) => spec.resumes !== undefined)
  .map((spec) => ({ tool: toolNameOf(spec), agent: new AgentTool(spec, DEFAULTS.get(spec.agent)!, {}, undefined) }))

for (const { tool, agent } of resumable) {
  t.test(`${tool}: a follow-up continues the session the first run reported, where it ran, ` +
    'the task still the prompt', async (t) => {
    const { app } = await service(t)
    const cwd = tempDir(t)
    const first = await runTool(app, tool, { task: 'write the parser', cwd }, ALICE)
    t.match(first, { ok: true, session_id: /^([0-9a-f-]{36}|ses_[0-9a-f]{12}[0-9A-Za-z]{14})$/ })
    const followUp = await runTool(app, tool, { task: '--help now add its tests', resume: first.session_id! }, ALICE)
    t.match(followUp, { ok: true, session_id: first.session_id }, 'the same session goes on')
    const seen = echoed(followUp) as ReturnType<typeof echoed> & { earlier: string[] }
    t.same(seen.earlier, ['write the parser'], 'the agent was given its conversation back')
    t.equal(seen.prompt, '--help now add its tests', 'the task byte for byte, never a flag')
    t.equal(seen.cwd, cwd, 'in the session’s directory, though the follow-up named none')
    t.same(
      seen.argv, agent.invocation(seen.prompt, first.session_id!).args,
      'the argv its spec builds to continue that session'
    )
    const third = await runTool(app, tool, { task: 'and document it', resume: first.session_id!, cwd }, ALICE)
    t.same(
      (echoed(third) as ReturnType<typeof echoed> & { earlier: string[] }).earlier,
      ['write the parser', '--help now add its tests'], 'the same cwd given: the same session, longer'
    )
  })
}

t.test('gemini_run: the session goes as --resume=<id> after its flags; the task on its stdin', async (t) => {
  const { app } = await service(t)
  const first = await runTool(app, 'gemini_run', { task: 'write the parser' }, ALICE)
  const followUp = await runTool(
    app, 'gemini_run', { task: '--help now add its tests', resume: first.session_id! }, ALICE
  )
  t.match(followUp, { ok: true, session_id: first.session_id })
  const seen = echoed(followUp) as ReturnType<typeof echoed> & { earlier: string[] }
  t.same(seen.earlier, ['write the parser'])
  t.equal(seen.prompt, '--help now add its tests')
  t.same(seen.argv.slice(-2), ['--skip-trust', `--resume=${first.session_id!}`])
})

t.test('only its owner continues a session, with the same tool; unknown, foreign and other tools’ ids are 404, ' +
  'nothing starts', async (t) => {
  const { app, log } = await service(t)
  const first = await runTool(app, 'claude_run', { task: 'hello' }, ALICE)
  const before = starts(log)
  for (const [who, tool, id] of [
    [BOB, 'claude_run', first.session_id], [ALICE, 'codex_run', first.session_id],
    [ALICE, 'claude_run', '0b5e0000-0000-4000-8000-000000000000']
  ] as const) {
    const answer = await refused(app, tool, { task: 'go on', resume: id }, who)
    t.match(answer, {
      status: 404,
      body: { code: 'SESSION_NOT_FOUND', message: `body/resume: no session ${id!} of yours to continue with this tool` }
    })
  }
  t.equal(starts(log), before, 'no agent started')
  t.equal(app.slots.inUse('claude_run'), 0)
})

t.test('what an agent says its session is, is checked: another caller’s id, one its CLI never issues, a megabyte, ' +
  '`latest` are not kept', async (t) => {
  const { app, log } = await service(t)
  const bobs = await runTool(app, 'claude_run', { task: 'bob’s secret plan' }, BOB)
  const forged = await runTool(app, 'claude_run', { task: scenario.reportSession(bobs.session_id!) }, ALICE)
  t.match(forged, { ok: true, session_id: null }, 'alice’s run reporting bob’s session leaves none')
  t.match(
    await refused(app, 'claude_run', { task: 'print the conversation', resume: bobs.session_id }, ALICE),
    { status: 404, body: { code: 'SESSION_NOT_FOUND' } }, 'alice cannot continue it'
  )
  const followUp = await runTool(app, 'claude_run', { task: 'go on', resume: bobs.session_id! }, BOB)
  t.match(followUp, { ok: true, session_id: bobs.session_id }, 'bob still continues his own')
  t.same((echoed(followUp) as ReturnType<typeof echoed> & { earlier: string[] }).earlier, ['bob’s secret plan'])
  for (const id of ['latest', '0'.repeat(20_000), `${bobs.session_id!}0`, 'ses_dce1285f3ffe0xs4bebTgxx2MR']) {
    const answer = await runTool(app, 'claude_run', { task: scenario.reportSession(id) }, ALICE)
    t.equal(answer.session_id, null, `${id.slice(0, 40)}: not claude's`)
  }
  const before = starts(log)
  t.match(
    await refused(app, 'claude_run', { task: 'go on', resume: 'latest' }, ALICE),
    { status: 404, body: { code: 'SESSION_NOT_FOUND' } }, 'latest never reaches the CLI'
  )
  t.equal(starts(log), before)
})

t.test('a follow-up may only leave the session it continued: another id it reports is not kept', async (t) => {
  const { app } = await service(t)
  const first = await runTool(app, 'claude_run', { task: 'hello' }, ALICE)
  const other = await runTool(app, 'claude_run', { task: 'another' }, ALICE)
  const followUp = await runTool(
    app, 'claude_run', { task: scenario.reportSession(other.session_id!), resume: first.session_id! }, ALICE
  )
  t.match(followUp, { ok: true, session_id: null })
})

t.test('an agent whose CLI cannot continue a session: 400 with its own code', async (t) => {
  const { app } = await service(t)
  t.match(await refused(app, 'crush_run', { task: 'go on', resume: 'anything' }, ALICE), {
    status: 400, body: { code: 'RESUME_NOT_SUPPORTED' }
  })
  t.match(
    await refused(app, 'claude_run', { task: 'go on', resume: '-x' }, ALICE),
    { status: 400, body: { code: 'VALIDATION_ERROR', message: /resume/ } }, 'an id that could read as a flag is no id'
  )
})

t.test('a session continues where it ran: another cwd is refused with what it was', async (t) => {
  const { app } = await service(t)
  const cwd = tempDir(t)
  const other = tempDir(t)
  const first = await runTool(app, 'codex_run', { task: 'hello', cwd }, ALICE)
  t.match(await refused(app, 'codex_run', { task: 'go on', resume: first.session_id, cwd: other }, ALICE), {
    status: 400,
    body: {
      code: 'RESUME_PLACE_MISMATCH',
      message: `body/cwd: the session ran with cwd ${cwd}, not ${other}; leave it out to continue there`
    }
  })
  const defaulted = await runTool(app, 'codex_run', { task: 'hello' }, ALICE)
  t.match(await refused(app, 'codex_run', { task: 'go on', resume: defaulted.session_id, cwd }, ALICE), {
    status: 400, body: { code: 'RESUME_PLACE_MISMATCH', message: /with cwd \(the default\)/ }
  })
})

t.test('two follow-ups of one session at once: the second is 409 and holds no slot; ' +
  'once the first ends, it may go on', async (t) => {
  const { app } = await service(t, { MAX_CLAUDE_AGENTS: '4' })
  const first = await runTool(app, 'claude_run', { task: 'hello' }, ALICE)
  const held = heldAgent(t)
  const continuing = runTool(app, 'claude_run', { task: held.task, resume: first.session_id! }, ALICE)
  await readPidFile(held.pidFile)
  t.match(await refused(app, 'claude_run', { task: 'me too', resume: first.session_id }, ALICE), {
    status: 409, body: { code: 'SESSION_BUSY' }
  })
  t.equal(app.slots.inUse('claude_run'), 1, 'only the first holds a slot')
  held.release()
  t.match(await continuing, { ok: true, session_id: first.session_id })
  t.match(
    await runTool(app, 'claude_run', { task: 'now me', resume: first.session_id! }, ALICE), { ok: true },
    'released at its end'
  )
})

t.test('async runs and MCP continue sessions too; POST /runs answers the same refusals', async (t) => {
  const { app } = await service(t)
  const first = await runTool(app, 'codex_run', { task: 'hello' }, ALICE)
  const created = await createRun(app, { tool: 'codex_run', task: 'async follow-up', resume: first.session_id! }, ALICE)
  const done = await settled(app, created.id, 10_000, ALICE)
  t.same((echoed(done.result!) as ReturnType<typeof echoed> & { earlier: string[] }).earlier, ['hello'])
  t.match(await call(app, 'POST', '/runs', {
    body: { tool: 'codex_run', task: 'x', resume: first.session_id }, headers: BOB
  }), { status: 404, body: { code: 'SESSION_NOT_FOUND' } })
  const mcp = await app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { ...ALICE, accept: 'application/json, text/event-stream' },
    payload: {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'codex_run', arguments: { task: 'mcp follow-up', resume: first.session_id } }
    }
  })
  const message = JSON.parse(/^data: (.*)$/m.exec(mcp.body)?.[1] ?? mcp.body)
  const structured = message.result.structuredContent
  t.same(
    (echoed(structured) as ReturnType<typeof echoed> & { earlier: string[] }).earlier, ['hello', 'async follow-up']
  )
})

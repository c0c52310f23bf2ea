import t from 'tap'
import { build, parseNdjson, scenario } from '../helpers/index.js'

// A caller following a live run sees what the agent does as `step` events, whichever CLI runs it, beside its output.

interface StreamEvent { type: string; step?: { kind: string; phase?: string; command?: string; exit_code?: number | null; status?: string } }

for (const tool of ['claude_run', 'codex_run'] as const) {
  t.test(`${tool}: each command the agent runs is a started and a completed step, with its exit code`, async (t) => {
    const app = await build(t)
    const response = await app.inject({
      method: 'POST',
      url: `/tools/${tool}`,
      payload: { task: scenario.shell('ls', '/no/such/dir') },
      headers: { accept: 'application/x-ndjson' }
    })
    t.equal(response.statusCode, 200)
    const events = parseNdjson(response.body) as StreamEvent[]
    const commands = events.filter((event) => event.type === 'step' && event.step?.kind === 'command').map((event) => event.step)
    t.match(commands, [
      { phase: 'started', command: 'ls /no/such/dir', status: 'running', exit_code: null },
      { phase: 'completed', command: 'ls /no/such/dir', status: 'failed', exit_code: 2 }
    ])
    t.equal(commands.length, 2)
    t.ok(events.some((event) => event.type === 'output'), 'its raw output still comes')
    t.equal(events.at(-1)!.type, 'result', 'and the result last')
  })
}

t.test('crush prints plain text: no steps, its output as before', async (t) => {
  const app = await build(t)
  const response = await app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: scenario.shell('true') }, headers: { accept: 'application/x-ndjson' } })
  const events = parseNdjson(response.body) as StreamEvent[]
  t.same(events.filter((event) => event.type === 'step'), [])
  t.match(events.at(-1), { type: 'result', result: { ok: true } })
})

t.test('over SSE too: a step is an event of its own kind', async (t) => {
  const app = await build(t)
  const response = await app.inject({ method: 'POST', url: '/tools/claude_run', payload: { task: scenario.shell('true') }, headers: { accept: 'text/event-stream' } })
  t.match(response.body, /^event: step\ndata: \{"type":"step","step":\{"kind":"command","phase":"completed".*"exit_code":0/m)
})

t.test('the result says what was done: codex its commands, session and usage; crush nothing', async (t) => {
  const app = await build(t)
  const result = (await app.inject({ method: 'POST', url: '/tools/codex_run', payload: { task: scenario.shell('ls', '/no/such/dir') } })).json()
  t.match(result, {
    ok: true,
    session_id: /^[0-9a-f-]{36}$/,
    usage: { input_tokens: 10, output_tokens: 5, cost_usd: null },
    steps_summary: { commands: [{ command: 'ls /no/such/dir', exit_code: 2, status: 'failed' }], messages: 1, errors: 0, skipped_lines: 0 }
  })
  const crush = (await app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: 'hello' } })).json()
  t.match(crush, { ok: true, session_id: null, usage: null, steps_summary: null })
})

// Not followed live, claude and gemini still print stream-json: a synchronous run's result tells what they did.
for (const tool of ['claude_run', 'gemini_run'] as const) {
  t.test(`${tool}: a synchronous run's result says what was done, as a followed one's does`, async (t) => {
    const app = await build(t)
    const result = (await app.inject({ method: 'POST', url: `/tools/${tool}`, payload: { task: scenario.shell('ls', '/no/such/dir') } })).json()
    t.match(result, {
      ok: true,
      session_id: /^[0-9a-f-]{36}$/,
      usage: { cost_usd: tool === 'claude_run' ? Number : null },
      // gemini tells an exit code only for a command that printed nothing.
      steps_summary: {
        commands: [{ command: 'ls /no/such/dir', exit_code: tool === 'claude_run' ? 2 : null, status: tool === 'claude_run' ? 'failed' : 'succeeded' }],
        denied: [],
        messages: 1,
        skipped_lines: 0
      }
    })
    t.equal(result.steps_summary.commands.length, 1)
  })
}

// The stand-in refuses every shell call in these modes, as claude does one that is not read-only.
for (const mode of ['dontAsk', 'default']) {
  t.test(`claude in ${mode} mode: a refused command is denied in the result, and a run with nothing but refusals is not ok`, async (t) => {
    const app = await build(t, { CLAUDE_PERMISSION_MODE: mode })
    const result = (await app.inject({ method: 'POST', url: '/tools/claude_run', payload: { task: scenario.shell('touch', 'x') } })).json()
    t.match(result, {
      ok: false,
      exit_code: 0,
      agent_report: { is_error: false },
      steps_summary: { commands: [{ command: 'touch x', exit_code: null, status: 'denied' }], denied: [{ kind: 'command', name: 'touch x' }] }
    })
    t.equal(result.steps_summary.denied.length, 1)
  })
}

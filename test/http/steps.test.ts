import t from 'tap'
import {
  build, call, createRun, listen, outputs, outputText, parseNdjson, parseSse, refused, scenario, settled, type RunEvent
} from '../helpers/index.js'

// A caller following a live run sees what the agent does as `step` events, whichever CLI runs it, beside its output.

const stepsOf = (events: RunEvent[]) => events.filter((event) => event.type === 'step')

interface StreamEvent {
  type: string
  step?: { kind: string; phase?: string; command?: string; exit_code?: number | null; status?: string }
}

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
    const commands = events.filter(
      (event) => event.type === 'step' && event.step?.kind === 'command'
    ).map((event) => event.step)
    t.match(commands, [
      { phase: 'started', command: 'ls /no/such/dir', status: 'running', exit_code: null },
      { phase: 'completed', command: 'ls /no/such/dir', status: 'failed', exit_code: 2 }
    ])
    t.equal(commands.length, 2)
    t.ok(events.some((event) => event.type === 'output'), 'its raw output still comes')
    t.equal(events.at(-1)!.type, 'result', 'and the result last')
  })
}

t.test('crush prints plain text: each line it prints is a message step, beside its output as before', async (t) => {
  const app = await build(t)
  const response = await app.inject({
    method: 'POST',
    url: '/tools/crush_run',
    payload: { task: scenario.drip(2, 10) },
    headers: { accept: 'application/x-ndjson' }
  })
  const events = parseNdjson(response.body) as StreamEvent[]
  t.same(
    stepsOf(events as RunEvent[]).map((event) => (event as { step: unknown }).step),
    ['tick 1', 'tick 2', 'dripped'].map((text) => ({ kind: 'message', text, truncated: false }))
  )
  t.equal(outputText(events as RunEvent[]), 'tick 1\ntick 2\ndripped\n')
  t.match(events.at(-1), {
    type: 'result', result: { ok: true, steps_summary: { messages: 3, commands: [] }, session_id: null }
  })
})

t.test('over SSE too: a step is an event of its own kind', async (t) => {
  const app = await build(t)
  const response = await app.inject({
    method: 'POST',
    url: '/tools/claude_run',
    payload: { task: scenario.shell('true') },
    headers: { accept: 'text/event-stream' }
  })
  t.match(
    response.body, /^event: step\ndata: \{"type":"step","step":\{"kind":"command","phase":"completed".*"exit_code":0/m
  )
})

t.test('the result says what was done: codex its commands, session and usage; crush its lines', async (t) => {
  const app = await build(t)
  const result = (await app.inject({
    method: 'POST', url: '/tools/codex_run', payload: { task: scenario.shell('ls', '/no/such/dir') }
  })).json()
  t.match(result, {
    ok: true,
    session_id: /^[0-9a-f-]{36}$/,
    usage: { input_tokens: 10, output_tokens: 5, cost_usd: null },
    steps_summary: {
      commands: [{ command: 'ls /no/such/dir', exit_code: 2, status: 'failed' }],
      messages: 1,
      errors: 0,
      skipped_lines: 0
    }
  })
  const crush = (await app.inject({ method: 'POST', url: '/tools/crush_run', payload: { task: 'hello' } })).json()
  t.match(crush, {
    ok: true, session_id: null, usage: null, steps_summary: { messages: 1, commands: [], skipped_lines: 0 }
  })
})

t.test('a stream carries what the caller chose: steps, output or both (the default); ' +
  'the result ends each', async (t) => {
  const app = await build(t)
  const streamed = async (events?: string) => parseNdjson((await app.inject({
    method: 'POST',
    url: '/tools/codex_run',
    payload: { task: scenario.shell('ls', '/no/such/dir'), ...(events === undefined ? {} : { events }) },
    headers: { accept: 'application/x-ndjson' }
  })).body)
  const both = await streamed()
  t.ok(stepsOf(both).length > 0 && outputs(both).length > 0, 'by default, both')
  const steps = await streamed('steps')
  t.same(outputs(steps), [], 'steps: no output event')
  t.same(stepsOf(steps), stepsOf(both), 'the same steps')
  const output = await streamed('output')
  t.same(stepsOf(output), [], 'output: no step event')
  const sameRunAside = (text: string) => text.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, 'ID')
  t.equal(sameRunAside(outputText(output)), sameRunAside(outputText(both)), 'the same output (its thread id aside)')
  for (const events of [both, steps, output]) {
    t.match(events.at(-1), { type: 'result', result: { ok: true, steps_summary: { commands: [{ exit_code: 2 }] } } })
  }
  t.match((await refused(app, 'codex_run', { task: 'x', events: 'all' })).body, {
    code: 'VALIDATION_ERROR', message: /events/
  })
})

t.test('an async run keeps its steps among its events: each with an id to resume from, ' +
  'chosen by each follower', async (t) => {
  const app = await build(t)
  const base = await listen(t, app)
  const created = await createRun(app, { tool: 'claude_run', task: scenario.shell('ls', '/no/such/dir') })
  await settled(app, created.id)
  const followed = async (
    query = '', lastEventId?: string
  ) => parseSse(await (await fetch(`${base}/runs/${created.id}/events${query}`, {
    headers: lastEventId === undefined ? {} : { 'last-event-id': lastEventId }
  })).text()).filter((frame) => frame.event !== 'heartbeat')
  const all = await followed()
  const steps = all.filter((frame) => frame.event === 'step')
  const commands = steps.filter((frame) => (frame.data as { step: { kind: string } }).step.kind === 'command')
  t.match(commands.map((frame) => frame.data), [
    { type: 'step', step: { kind: 'command', phase: 'started', command: 'ls /no/such/dir' } },
    { type: 'step', step: { kind: 'command', phase: 'completed', exit_code: 2 } }
  ].map((step) => ({ ...step, id: /^[0-9]+\.[0-9]+$/ })), 'the command’s start and end, in the log')
  t.ok(steps.every((frame) => frame.id === (frame.data as { id: string }).id), 'the SSE id is the data’s')
  t.same(
    (await followed('?events=steps')).map((frame) => frame.event), [...steps.map(() => 'step'), 'result'], 'steps only'
  )
  t.notOk((await followed('?events=output')).some((frame) => frame.event === 'step'), 'output only')
  const afterFirst = await followed('', steps[0]!.id)
  t.same(afterFirst, all.slice(all.indexOf(steps[0]!) + 1), 'Last-Event-ID of a step: exactly what came after it')
  const bad = await fetch(`${base}/runs/${created.id}/events`, { headers: { 'last-event-id': '3.x' } })
  t.equal(bad.status, 400)
  t.match(await bad.json(), { code: 'VALIDATION_ERROR' })
  t.equal((await fetch(`${base}/runs/${created.id}/events?events=all`)).status, 400)
  const chosenAtStart = await call(app, 'POST', '/runs', { body: { tool: 'claude_run', task: 'x', events: 'steps' } })
  t.match(
    chosenAtStart, { status: 400, body: { code: 'VALIDATION_ERROR' } },
    'an async run’s followers choose, not its request'
  )
})

// Not followed live, claude and gemini still print stream-json: a synchronous run's result tells what they did.
for (const tool of ['claude_run', 'gemini_run'] as const) {
  t.test(`${tool}: a synchronous run's result says what was done, as a followed one's does`, async (t) => {
    const app = await build(t)
    const result = (await app.inject({
      method: 'POST', url: `/tools/${tool}`, payload: { task: scenario.shell('ls', '/no/such/dir') }
    })).json()
    t.match(result, {
      ok: true,
      session_id: /^[0-9a-f-]{36}$/,
      usage: { cost_usd: tool === 'claude_run' ? Number : null },
      // gemini tells an exit code only for a command that printed nothing.
      steps_summary: {
        commands: [
          {
            command: 'ls /no/such/dir',
            exit_code: tool === 'claude_run' ? 2 : null,
            status: tool === 'claude_run' ? 'failed' : 'succeeded'
          }
        ],
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
  t.test(`claude in ${mode} mode: a refused command is denied in the result, ` +
    'and a run with nothing but refusals is not ok', async (t) => {
    const app = await build(t, { CLAUDE_PERMISSION_MODE: mode })
    const result = (await app.inject({
      method: 'POST', url: '/tools/claude_run', payload: { task: scenario.shell('touch', 'x') }
    })).json()
    t.match(result, {
      ok: false,
      exit_code: 0,
      agent_report: { is_error: false },
      steps_summary: {
        commands: [{ command: 'touch x', exit_code: null, status: 'denied' }],
        denied: [{ kind: 'command', name: 'touch x' }]
      }
    })
    t.equal(result.steps_summary.denied.length, 1)
  })
}

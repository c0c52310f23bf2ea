// The operator console (docs/console.md): plain browser code, no build, no dependency. It calls the service's own API
// with the token typed once (kept in this tab's window.sessionStorage), so it shows exactly what that token may see. It
// builds DOM nodes and sets text, never HTML: the page's CSP refuses string sinks (require-trusted-types-for).

const TOKEN_KEY = 'agent-runner.token'
/** How often runs and slots are read again: a run that starts shows within this. */
const POLL_MS = 2000
/** Readiness probes each CLI: read less often. */
const READY_EVERY = 5
/** What the output pane keeps of a long run: its tail. */
const OUTPUT_KEEP_CHARS = 200_000
const SSE_RETRY_MS = 1000

const $ = (id) => document.getElementById(id)

const state = {
  /** null: not signed in; '' for a service without tokens. */
  token: window.sessionStorage.getItem(TOKEN_KEY),
  runs: [],
  /** Settles once runs were first listed. */
  listed: null,
  gotListing: () => {},
  poll: undefined,
  ticks: 0,
  /** The run in the run pane, and its follower's stream. */
  selected: null,
  follower: null,
  lastEventId: null,
  steps: new Map(),
  output: ''
}

class Refused extends Error {}
class Unavailable extends Error {}

state.listed = new Promise((resolve) => { state.gotListing = resolve })

const authHeaders = () => (state.token ? { authorization: `Bearer ${state.token}` } : {})

/** One API call: 401 signs out, a network failure or a 5xx is the service unavailable. */
async function api(method, path, { accept = 'application/json', signal } = {}) {
  let response
  try {
    response = await fetch(path, { method, headers: { ...authHeaders(), accept }, signal, cache: 'no-store' })
  } catch (error) {
    if (signal?.aborted) throw error
    throw new Unavailable('the service does not answer')
  }
  if (response.status === 401) {
    signOut('The service refused this token (401). Enter another.')
    throw new Refused('401')
  }
  return response
}

async function json(method, path) {
  const response = await api(method, path)
  const body = await response.json().catch(() => null)
  if (response.status >= 500) throw new Unavailable(body?.message ?? `HTTP ${response.status}`)
  if (!response.ok) throw new Error(body?.message ?? `HTTP ${response.status}`)
  return body
}

function element(tag, props = {}, ...children) {
  const node = document.createElement(tag)
  for (const [key, value] of Object.entries(props)) {
    if (key === 'dataset') Object.assign(node.dataset, value)
    else if (key in node) node[key] = value
    else node.setAttribute(key, value)
  }
  node.append(...children.filter((child) => child !== null && child !== undefined))
  return node
}

function duration(ms) {
  const total = Math.max(0, Math.round(ms / 1000))
  const hours = Math.floor(total / 3600)
  const minutes = Math.floor((total % 3600) / 60)
  const seconds = total % 60
  if (hours > 0) return `${hours}h ${String(minutes).padStart(2, '0')}m`
  if (minutes > 0) return `${minutes}m ${String(seconds).padStart(2, '0')}s`
  return `${seconds}s`
}

const clock = (iso) => new Date(iso).toLocaleTimeString()

function elapsedOf(run, now = Date.now()) {
  const end = run.finished_at === null ? now : Date.parse(run.finished_at)
  return duration(end - Date.parse(run.created_at))
}

function deadlineOf(run, now = Date.now()) {
  if (run.deadline === null) return '—'
  if (run.status !== 'running') return clock(run.deadline)
  const left = Date.parse(run.deadline) - now
  return left > 0 ? `in ${duration(left)}` : 'passed'
}

/** A run not yet ended: running, or waiting for a slot. */
const LIVE = new Set(['running', 'queued'])

/** Live runs first; the API gives each group newest first. */
const liveFirst = (runs) => [...runs.filter((run) => LIVE.has(run.status)), ...runs.filter((run) => !LIVE.has(run.status))]

function setStatus(text, kind = 'ok') {
  const status = $('status')
  status.textContent = text
  status.dataset.kind = kind
}

function show(view) {
  document.body.dataset.state = view
  $('login').hidden = view !== 'signed-out' && view !== 'unauthorized'
  $('console').hidden = !$('login').hidden
  $('forget').hidden = $('console').hidden
}

// --- signing in and out ---

function signIn(token) {
  state.token = token
  window.sessionStorage.setItem(TOKEN_KEY, token)
  $('login-problem').textContent = ''
  show('ready')
  setStatus('Connecting…')
  state.ticks = 0
  void refresh()
}

function signOut(problem) {
  clearTimeout(state.poll)
  state.poll = undefined
  unfollow()
  state.token = null
  window.sessionStorage.removeItem(TOKEN_KEY)
  $('login-problem').textContent = problem ?? ''
  show(problem ? 'unauthorized' : 'signed-out')
  setStatus(problem ? 'Signed out: the token was refused' : 'Signed out', problem ? 'error' : 'ok')
  $('token').focus()
}

// --- polling: runs, slots, agents ---

async function refresh() {
  clearTimeout(state.poll)
  try {
    const readyDue = state.ticks % READY_EVERY === 0
    const [runs, tools, metrics, ready] = await Promise.all([
      json('GET', '/runs'),
      json('GET', '/tools'),
      api('GET', '/metrics', { accept: 'text/plain' }).then((response) => (response.ok ? response.text() : '')),
      readyDue ? api('GET', '/readyz').then((response) => response.json()) : null
    ])
    state.ticks++
    state.runs = liveFirst(runs.runs)
    state.gotListing()
    renderRuns()
    renderSlots(tools.tools, refusedForSlots(metrics))
    if (ready !== null) renderReadiness(ready)
    if (document.body.dataset.state !== 'ready') show('ready')
    setStatus(`Live · updated ${new Date().toLocaleTimeString()}`)
    syncSelected()
  } catch (error) {
    if (error instanceof Refused) return
    show('unavailable')
    setStatus(`Service unavailable: ${error.message}. Retrying…`, 'error')
  }
  // One timer at most, however many refreshes overlapped (a Stop, a result and the poll itself may each ask for one).
  clearTimeout(state.poll)
  if (state.token !== null) state.poll = setTimeout(() => void refresh(), POLL_MS)
}

/** Each tool's 429s for full slots, from this replica's Prometheus counters. */
function refusedForSlots(text) {
  const counts = {}
  for (const line of text.split('\n')) {
    if (!line.startsWith('agent_runner_rejections_total{') || !line.includes('reason="AGENT_LIMIT_REACHED"')) continue
    const tool = /tool="([^"]*)"/.exec(line)?.[1]
    if (tool !== undefined) counts[tool] = (counts[tool] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return counts
}

function renderRuns() {
  const body = $('runs').tBodies[0]
  const focused = document.activeElement?.closest?.('#runs tr')?.dataset.id
  const rows = state.runs.map((run) => {
    const link = element('a', { href: `#run=${encodeURIComponent(run.id)}`, className: 'task-link' },
      run.task ?? `(${run.tool} run ${run.id.slice(0, 8)})`)
    if (run.id === state.selected) link.setAttribute('aria-current', 'true')
    const place = run.queue_position === undefined ? null : ` #${run.queue_position}`
    return element('tr', { dataset: { id: run.id, status: run.status } },
      element('td', {}, badge(run.status), place),
      element('td', {}, run.tool, element('span', { className: 'kind muted' }, ` ${run.kind}`)),
      element('td', { className: 'task-cell' }, link),
      element('td', { className: 'wide' }, run.caller),
      element('td', { dataset: { elapsed: run.id } }, elapsedOf(run)),
      element('td', { className: 'wide', dataset: { deadline: run.id } }, deadlineOf(run)))
  })
  body.replaceChildren(...rows)
  if (focused !== undefined) body.querySelector(`tr[data-id="${window.CSS.escape(focused)}"] a`)?.focus()
  const live = state.runs.filter((run) => LIVE.has(run.status)).length
  $('runs-count').textContent = state.runs.length === 0 ? '' : `${live} live · ${state.runs.length} listed`
  $('runs-empty').hidden = state.runs.length > 0
  $('runs').hidden = state.runs.length === 0
}

const badge = (status) => element('span', { className: `badge ${status}` }, status.replace('_', ' '))

function renderSlots(tools, refused) {
  $('slots').tBodies[0].replaceChildren(...tools.map((tool) => {
    const full = tool.free === 0
    const meter = element('meter', { min: 0, max: tool.limit, value: tool.in_use, high: tool.limit - 0.5 })
    meter.setAttribute('aria-label', `${tool.name}: ${tool.in_use} of ${tool.limit} in use`)
    return element('tr', { dataset: { tool: tool.name, full: String(full) } },
      element('th', { scope: 'row' }, tool.name),
      element('td', {}, meter, element('span', { className: 'slots-text' },
        ` ${tool.in_use} / ${tool.limit}`, full ? element('strong', { className: 'full' }, ' full') : null)),
      element('td', { className: 'queued' }, String(tool.queued)),
      element('td', { className: 'refused' }, String(refused[tool.name] ?? 0)))
  }))
}

function renderReadiness(ready) {
  const agents = ready.agents ?? []
  $('agents').tBodies[0].replaceChildren(...agents.map((agent) =>
    element('tr', { dataset: { tool: agent.tool, usable: String(agent.path !== null && agent.problem === null) } },
      element('th', { scope: 'row' }, agent.tool),
      element('td', {}, agent.path === null ? `${agent.bin} not found` : (agent.version ?? 'version unknown')),
      element('td', { className: agent.problem ? 'problem' : 'muted' }, agent.problem ?? '—'))))
  $('agents-empty').hidden = agents.length > 0
  renderFleet(ready.fleet)
  const containment = ready.containment
  $('containment').replaceChildren(...(containment === undefined
    ? ['—']
    : [element('strong', {}, containment.mode), `: ${containment.reason} `,
        element('span', { className: 'muted' }, `Can outlive a run: ${containment.escapes}`)]))
}

/** ROLE=api: the fleet's roll (absent for a replica that runs its runs itself). */
function renderFleet(fleet) {
  $('fleet').hidden = fleet === undefined
  if (fleet === undefined) return
  $('members').tBodies[0].replaceChildren(...fleet.members.map((member) => {
    const places = member.places?.includes('wsl') ? ' (WSL too)' : ''
    const takes = Object.entries(member.agents).map(([tool, most]) => `${tool} × ${most}`).join(', ')
    return element('tr', { dataset: { role: member.role, id: member.id } },
      element('th', { scope: 'row' }, member.role, element('span', { className: 'muted' }, ` ${member.id.slice(0, 8)}`)),
      element('td', {}, member.host),
      element('td', { className: takes === '' ? 'muted' : '' }, takes === '' ? '—' : `${takes}${places}`),
      element('td', { className: 'muted' }, new Date(member.last_seen).toLocaleTimeString()))
  }))
  $('fleet-problem').hidden = fleet.error === undefined
  $('fleet-problem').textContent = fleet.error === undefined ? '' : `The roll could not be read: ${fleet.error}`
}

/** Elapsed and time left move every second between polls. */
function tick() {
  const now = Date.now()
  for (const run of state.runs) {
    if (!LIVE.has(run.status)) continue
    const id = window.CSS.escape(run.id)
    const elapsed = document.querySelector(`[data-elapsed="${id}"]`)
    if (elapsed) elapsed.textContent = elapsedOf(run, now)
    const deadline = document.querySelector(`[data-deadline="${id}"]`)
    if (deadline) deadline.textContent = deadlineOf(run, now)
  }
  const selected = state.runs.find((run) => run.id === state.selected)
  if (selected) renderFacts(selected, now)
}

// --- one run: its facts, its steps and output, Stop ---

function selectedFromHash() {
  const match = /^#run=(.+)$/.exec(window.location.hash)
  return match === null ? null : decodeURIComponent(match[1])
}

async function select(id) {
  if (id === state.selected) return
  unfollow()
  state.selected = id
  state.steps = new Map()
  state.output = ''
  state.lastEventId = null
  $('steps').replaceChildren()
  $('steps').hidden = true
  $('steps-title').hidden = true
  $('output-box').open = true
  $('run-note').textContent = ''
  $('output').textContent = ''
  $('run-result').textContent = '—'
  $('run-detail').hidden = id === null
  $('run-empty').hidden = id !== null
  $('run-empty').textContent = 'Choose a run to follow its steps and output.'
  renderRuns()
  if (id === null) return
  // The listing has every run this token may see that is still kept: one it lacks (a page opened on an old link) is
  // gone, and asking for it would only be a 404.
  await state.listed
  if (state.selected !== id) return
  const run = state.runs.find((listed) => listed.id === id)
  if (run === undefined) {
    $('run-title').textContent = 'Run'
    $('run-detail').hidden = true
    $('run-empty').hidden = false
    $('run-empty').textContent = 'That run is no longer kept: a synchronous run ends with its response, a finished one ' +
      'after RUNS_RETENTION_MS.'
    return
  }
  renderFacts(run)
  void renderDeliveries(run)
  $('run-title').focus()
  if (run.kind === 'async') void follow(id)
  else $('run-note').textContent = 'A synchronous or streamed run’s output goes to its own caller: only its state shows here.'
}

function renderFacts(run, now = Date.now()) {
  $('run-title').textContent = `Run ${run.id.slice(0, 8)}`
  $('run-state').replaceChildren(badge(run.status))
  $('run-tool').textContent = `${run.tool} (${run.kind})`
  $('run-caller').textContent = run.caller
  $('run-elapsed').textContent = elapsedOf(run, now)
  $('run-deadline').textContent = deadlineOf(run, now)
  $('run-budget').textContent = budgetOf(run)
  $('run-task').textContent = run.task ?? ''
  $('stop').disabled = !LIVE.has(run.status)
  $('run').dataset.status = run.status
}

/** The listing moved on: the run pane shows the run's new state. */
function syncSelected() {
  const run = state.runs.find((listed) => listed.id === state.selected)
  if (run === undefined) return
  renderFacts(run)
  void renderDeliveries(run)
}

/** One delivery as a line: its event, where it stands, and its last attempt's answer. */
function deliveryText(delivery) {
  const last = delivery.attempts.at(-1)
  const answer = last === undefined ? '' : `, last: ${last.status ?? last.error} at ${clock(last.at)}`
  const next = delivery.next_attempt_at === null ? '' : `, next at ${clock(delivery.next_attempt_at)}`
  const tries = `${delivery.attempts.length} attempt${delivery.attempts.length === 1 ? '' : 's'}`
  return `${delivery.type}: ${delivery.state.replace('_', ' ')} (${tries}${answer}${next})`
}

/** A run with a webhook: each event's delivery to its URL (GET /runs/{id}/deliveries). */
async function renderDeliveries(run) {
  const shown = run.webhook !== undefined
  $('deliveries-title').hidden = !shown
  $('deliveries').hidden = !shown
  if (!shown) return $('deliveries').replaceChildren()
  $('deliveries-title').textContent = `Webhook to ${run.webhook.url}`
  let deliveries
  try {
    ({ deliveries } = await json('GET', `/runs/${encodeURIComponent(run.id)}/deliveries`))
  } catch {
    return
  }
  if (state.selected !== run.id) return
  $('deliveries').replaceChildren(...deliveries.map((delivery) =>
    element('li', { dataset: { state: delivery.state } }, deliveryText(delivery))))
}

function unfollow() {
  state.follower?.abort()
  state.follower = null
}

/**
 * Follows the run's events over SSE. EventSource cannot send a token, so the stream is read with fetch; a dropped
 * stream is resumed with Last-Event-ID, as the API allows.
 */
async function follow(id) {
  const controller = new AbortController()
  state.follower = controller
  $('run-note').textContent = 'Following…'
  while (!controller.signal.aborted) {
    let response
    try {
      response = await api('GET', `/runs/${encodeURIComponent(id)}/events`, { accept: 'text/event-stream', signal: controller.signal })
      if (!response.ok) {
        $('run-note').textContent = response.status === 404 ? 'Its events are no longer kept.' : `HTTP ${response.status}`
        return
      }
      if (await readEvents(response, controller.signal)) return
    } catch (error) {
      if (controller.signal.aborted || error instanceof Refused) return
    }
    $('run-note').textContent = 'The stream dropped: resuming…'
    await new Promise((resolve) => setTimeout(resolve, SSE_RETRY_MS))
  }
}

/** true once the result came: the stream is complete. */
async function readEvents(response, signal) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
  signal.addEventListener('abort', () => void reader.cancel().catch(() => {}), { once: true })
  let buffer = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return false
    buffer += value.replaceAll('\r\n', '\n')
    let end
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      // Another run was chosen meanwhile: what is left of this stream is not the run pane's.
      if (signal.aborted) return true
      const frame = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      if (onFrame(frame)) return true
    }
  }
}

function onFrame(frame) {
  const data = []
  for (const line of frame.split('\n')) {
    if (line.startsWith('id:')) state.lastEventId = line.slice(3).trim()
    else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''))
  }
  if (data.length === 0) return false
  const event = JSON.parse(data.join('\n'))
  if (event.type === 'output') appendOutput(event.data)
  else if (event.type === 'gap') appendOutput(`\n[… ${event.omitted_bytes} bytes not kept …]\n`)
  else if (event.type === 'step') showStep(event.step)
  else if (event.type === 'result') {
    showResult(event.result)
    return true
  }
  if ($('run-note').textContent === 'Following…' && event.type !== 'heartbeat') $('run-note').textContent = ''
  return false
}

function appendOutput(text) {
  state.output = (state.output + text).slice(-OUTPUT_KEEP_CHARS)
  const pane = $('output')
  const atBottom = pane.scrollTop + pane.clientHeight >= pane.scrollHeight - 4
  pane.textContent = state.output
  if (atBottom) pane.scrollTop = pane.scrollHeight
}

function stepText(step) {
  switch (step.kind) {
    case 'message': return step.text
    case 'command': return `$ ${step.command}${step.exit_code === null ? '' : ` → exit ${step.exit_code}`}`
    case 'file_change': return `${step.change} ${step.path} (${step.tool})`
    case 'tool': return `${step.name} ${step.input}`
    case 'error': return `${step.fatal ? 'error' : 'warning'}: ${step.message}`
    case 'usage': return `usage: ${step.input_tokens ?? '?'} in, ${step.output_tokens ?? '?'} out${step.model ? ` (${step.model})` : ''}`
    default: return step.kind
  }
}

/** A step with a call id replaces its own earlier report (started, then completed). */
function showStep(step) {
  const key = step.call_id ? `${step.kind}:${step.call_id}` : `#${state.steps.size}`
  const item = element('li', { className: `step ${step.kind}`, dataset: { status: step.status ?? '' } },
    element('span', { className: 'step-kind' }, step.kind.replace('_', ' ')), ' ', stepText(step))
  const earlier = state.steps.get(key)
  if (earlier) earlier.replaceWith(item)
  else $('steps').append(item)
  state.steps.set(key, item)
  $('steps').hidden = false
  $('steps-title').hidden = false
  // The steps tell what the agent does; its raw output stays one click away.
  $('output-box').open = false
}

/** The model a run asked for and the limits it is held to, as its state says (the CLI's choice and none: —). */
function budgetOf(run) {
  const limits = run.limits ?? {}
  const parts = [
    run.model ?? null,
    limits.max_turns === undefined ? null : `${limits.max_turns} turns`,
    limits.max_tokens === undefined ? null : `${limits.max_tokens} tokens`,
    limits.max_cost_usd === undefined ? null : `$${limits.max_cost_usd}`
  ].filter((part) => part !== null)
  return parts.length === 0 ? '—' : parts.join(' · ')
}

/** What a run spent, as its result says: turns, tokens, dollars, the model its CLI named. */
function spentText(result) {
  const usage = result.usage
  const turns = result.steps_summary?.turns
  const parts = [
    turns === undefined ? null : `${turns} turn${turns === 1 ? '' : 's'}`,
    usage === null ? null : `${usage.input_tokens ?? '?'} in, ${usage.output_tokens ?? '?'} out`,
    usage?.cost_usd == null ? null : `$${usage.cost_usd.toFixed(4)}`,
    usage?.model ?? null
  ]
  return parts.filter((part) => part !== null).map((part) => ` · ${part}`).join('')
}

function showResult(result) {
  const how = result.stop_reason ?? (result.timed_out ? 'timed out' : `exit ${result.exit_code ?? result.signal}`)
  $('run-result').textContent =
    `${result.ok ? 'ok' : 'not ok'} · ${how} · ${duration(result.duration_ms)}${spentText(result)}`
  $('run-note').textContent = ''
  void refresh()
}

async function stop() {
  const id = state.selected
  const button = $('stop')
  button.disabled = true
  button.textContent = 'Stopping…'
  try {
    const run = await json('DELETE', `/runs/${encodeURIComponent(id)}`)
    const listed = state.runs.findIndex((listedRun) => listedRun.id === id)
    if (listed >= 0) state.runs[listed] = { ...state.runs[listed], ...run }
    if (state.selected === id) renderFacts(run)
    setStatus(`Run ${id.slice(0, 8)} ${run.status}`)
  } catch (error) {
    if (!(error instanceof Refused)) setStatus(`Could not stop the run: ${error.message}`, 'error')
    button.disabled = false
  } finally {
    button.textContent = 'Stop'
  }
  void refresh()
}

// --- wiring ---

$('login-form').addEventListener('submit', (event) => {
  event.preventDefault()
  const input = $('token')
  const token = input.value.trim()
  input.value = ''
  signIn(token)
  void select(selectedFromHash())
})
$('forget').addEventListener('click', () => signOut())
$('stop').addEventListener('click', () => void stop())
$('close-run').addEventListener('click', (event) => {
  event.preventDefault()
  window.history.replaceState(null, '', window.location.pathname)
  void select(null)
  $('runs-title').focus()
})
window.addEventListener('hashchange', () => void select(selectedFromHash()))
setInterval(tick, 1000)

if (state.token === null) signOut()
else {
  signIn(state.token)
  void select(selectedFromHash())
}

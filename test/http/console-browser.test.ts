import t from 'tap'
import { existsSync } from 'node:fs'
import puppeteer, { type Browser, type ConsoleMessage, type Page } from 'puppeteer-core'
import { CONSOLE_CSP } from '#src/http/console.js'
import {
  build, createRun, fromRoot, getRun, heldAgent, listen, readPidFile, scenario, settled, startServer
} from '../helpers/index.js'
import { webhookReceiver } from '../helpers/webhook-receiver.js'
import { NO_REDIS, redisEnv, startRedis } from '../helpers/redis.js'
import { NO_AGENT_HERE } from '../fleet/fleet-hosts.js'

// The operator console (console/, docs/console.md) in a real browser: Debian's chromium, driven by puppeteer-core,
// against the service with its stand-in agents. The screenshots in docs/ are this test's.

// The functions given to page.evaluate run in the page: its globals, which the tests' Node types do not know (the DOM
// library would change fetch's and streams' types for every test).
declare const document: any
declare const window: any

const CHROMIUM = process.env['CHROMIUM_BIN'] ?? '/usr/bin/chromium'
const NO_CHROMIUM = !existsSync(CHROMIUM) && `chromium is not installed at ${CHROMIUM} (apt-get install chromium)`

const TOKEN = 'secret-a'
const as = { authorization: `Bearer ${TOKEN}` }
const WEBHOOK_SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`
/** A tool call every 300 ms, as claude reports it (steps); and lines of output, as crush writes them. */
const STEPS_TASK = '@tool-calls 400 300'
const OUTPUT_TASK = scenario.drip(400, 300)
/** What the page may wait for: long enough for a loaded 2-core machine, far less than the file's timeout. */
const WAIT = { timeout: 15_000 }
// The runs' rows are made anew as the list refreshes: a row is clicked through a locator, which finds it again if it
// was replaced between being found and being clicked ("Node is detached from document").

/** A run's row, once the listing shows it in `status`. */
const row = (page: Page, id: string, status: string) =>
  page.waitForSelector(`#runs tr[data-id="${id}"][data-status="${status}"]`, WAIT)

const launch = async (): Promise<Browser> => puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  // As root (CI containers) chromium's own sandbox cannot start; the page is the service's own.
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  defaultViewport: { width: 1280, height: 720 }
})

t.test('the console in chromium', { skip: NO_CHROMIUM }, async (t) => {
  const app = await build(t, {
    API_TOKENS: `alice:${TOKEN}`, MAX_CRUSH_AGENTS: '2', WEBHOOK_SECRET, WEBHOOK_ALLOW_HOSTS: '127.0.0.1'
  })
  const base = await listen(t, app)
  const browser = await launch()
  t.teardown(() => browser.close())
  const page = await browser.newPage()
  // What the page must never produce: a script error, a console error, a CSP violation.
  const errors: string[] = []
  page.on('pageerror', (error) => errors.push(`pageerror: ${String(error)}`))
  page.on('console', (message: ConsoleMessage) => {
    if (message.type() === 'error') errors.push(`console: ${message.text()}`)
  })
  await page.evaluateOnNewDocument(() => {
    document.addEventListener(
      'securitypolicyviolation', (event: any) => console.error(`CSP violation: ${event.violatedDirective}`)
    )
  })

  const response = await page.goto(`${base}/console`)
  t.equal(response?.headers()['content-security-policy'], CONSOLE_CSP, 'the page came with its CSP')
  t.equal(
    await page.$$eval('script:not([src])', (scripts) => scripts.length), 0, 'no inline script in the page as loaded'
  )

  t.test('a wrong token shows the 401 state, and is not kept', async (t) => {
    await page.waitForSelector('body[data-state="signed-out"]', WAIT)
    t.ok(await page.$eval('#token', (input) => document.activeElement === input), 'the token field has the focus')
    await page.type('#token', 'not-a-token')
    await page.keyboard.press('Enter')
    await page.waitForSelector('body[data-state="unauthorized"]', WAIT)
    t.match(await page.$eval('#login-problem', (problem) => problem.textContent), /refused this token \(401\)/)
    t.equal(await page.evaluate(() => window.sessionStorage.length), 0)
    t.equal(await page.$eval('#console', (layout) => layout.checkVisibility()), false, 'nothing of the console shows')
    await page.screenshot({ path: fromRoot('docs/console-401.png') })
    // Chromium reports each refused request as a console error: these, and nothing else.
    t.ok(errors.length > 0 && errors.every((error) => /status of 401/.test(error)), errors.join('\n'))
    errors.length = 0
  })

  t.test('signed in: two runs started through the API are both live; one is followed, stopped, ' +
    'and ends cancelled', async (t) => {
    await page.type('#token', TOKEN)
    await page.click('#login-form button')
    await page.waitForSelector('body[data-state="ready"]', WAIT)
    t.equal(await page.evaluate(() => window.sessionStorage.getItem('agent-runner.token')), TOKEN, 'kept for the tab')
    await page.waitForSelector('#runs-empty', { ...WAIT, visible: true })
    t.equal(
      await page.$eval('#runs', (table) => table.checkVisibility()), false,
      'no runs yet: the empty state, no empty table'
    )

    const steps = await createRun(app, { tool: 'claude_run', task: STEPS_TASK, timeout: 600 }, as)
    const output = await createRun(app, { tool: 'crush_run', task: OUTPUT_TASK, timeout: 900 }, as)
    for (const run of [steps, output]) await row(page, run.id, 'running')
    t.match(
      await page.$eval(`#runs tr[data-id="${output.id}"]`, (tr) => tr.textContent), /crush_run.*@drip 400 300.*alice/s,
      'tool, task and caller'
    )
    t.equal(await page.$eval('#runs tbody tr:first-child', (tr) => tr.dataset['status']), 'running', 'live first')
    t.match(
      await page.$eval(`#runs tr[data-id="${output.id}"] [data-deadline]`, (td) => td.textContent), /^in 1[45]m/,
      'its deadline, as time left'
    )
    await page.screenshot({ path: fromRoot('docs/console-runs.png') })

    await page.locator(`#runs tr[data-id="${steps.id}"] a`).setTimeout(WAIT.timeout).click()
    await page.waitForFunction(() => document.querySelectorAll('#steps li').length >= 3, WAIT)
    t.match(
      await page.$eval('#steps', (list) => list.textContent), /echo call 1/, 'its steps, as the agent reports them'
    )
    await page.screenshot({ path: fromRoot('docs/console-run.png') })

    await page.locator(`#runs tr[data-id="${output.id}"] a`).setTimeout(WAIT.timeout).click()
    await page.waitForFunction(() => /tick 1\ntick 2\n/.test(document.querySelector('#output')!.textContent), WAIT)
    t.match(
      await page.$eval('#steps', (list) => list.textContent), /tick 1.*tick 2/s, 'crush’s lines, as its message steps'
    )
    t.equal(
      await page.$eval('#steps', (list) => list.textContent.includes('echo call')), false,
      'nothing of the run followed before'
    )
    // Stop, from the keyboard.
    await page.focus('#stop')
    await page.keyboard.press('Enter')
    await page.waitForSelector('#run[data-status="cancelled"]', WAIT)
    await row(page, output.id, 'cancelled')
    await page.waitForFunction(() => /cancelled/.test(document.querySelector('#run-result')!.textContent), WAIT)
    t.equal((await getRun(app, output.id, as)).status, 'cancelled', 'the API agrees')
    t.equal(await page.$eval('#stop', (button) => button.disabled), true, 'an ended run cannot be stopped again')
    await row(page, steps.id, 'running')
    t.same(errors, [], 'no console error, no CSP violation')
  })

  t.test('an ended run says what it spent: its stop, turns, tokens', async (t) => {
    // Its third call is past the limit, and it waits to be stopped: it ends on the limit however slow the machine.
    const ended = await createRun(app, {
      tool: 'codex_run', task: scenario.callsUntilStopped(3), timeout: 30, limits: { max_turns: 2 }
    }, as)
    await settled(app, ended.id, 15_000, as)
    await row(page, ended.id, 'failed')
    await page.locator(`#runs tr[data-id="${ended.id}"] a`).setTimeout(WAIT.timeout).click()
    await page.waitForFunction(() => /turns/.test(document.querySelector('#run-result')!.textContent), WAIT)
    // The codex stand-in reports its tokens only as its turn completes: stopped before, it reported none.
    t.match(await page.$eval('#run-result', (result) => result.textContent), /^not ok · max_turns · .* · 3 turns$/)
    t.equal(await page.$eval('#run-budget', (budget) => budget.textContent), '2 turns', 'the limit it was held to')
    const answered = await createRun(app, {
      tool: 'codex_run', task: scenario.toolCalls(1, 1), model: 'gpt-x', limits: { max_tokens: 1000, max_turns: 9 }
    }, as)
    await settled(app, answered.id, 15_000, as)
    await row(page, answered.id, 'succeeded')
    await page.locator(`#runs tr[data-id="${answered.id}"] a`).setTimeout(WAIT.timeout).click()
    await page.waitForFunction(() => /in, /.test(document.querySelector('#run-result')!.textContent), WAIT)
    t.match(
      await page.$eval('#run-result', (result) => result.textContent), /^ok · exit 0 · .* · 2 turns · 10 in, 5 out$/
    )
    t.equal(await page.$eval('#run-budget', (budget) => budget.textContent), 'gpt-x · 9 turns · 1000 tokens')
  })

  t.test('a run waiting for a slot shows its place and its tool’s queue, and is stopped before it starts',
    async (t) => {
      const holders = [heldAgent(t), heldAgent(t)]
      const held = []
      for (const holder of holders) {
        held.push(await createRun(app, { tool: 'opencode_run', task: holder.task }, as))
        await readPidFile(holder.pidFile)
      }
      const queued = await createRun(app, { tool: 'opencode_run', task: 'after them', queue_timeout: 60 }, as)
      await row(page, queued.id, 'queued')
      t.match(await page.$eval(`#runs tr[data-id="${queued.id}"] td`, (cell) => cell.textContent), /^queued #1$/)
      await page.waitForFunction(
        () => document.querySelector('#slots tr[data-tool="opencode_run"] td.queued')?.textContent === '1', WAIT
      )
      await page.locator(`#runs tr[data-id="${queued.id}"] a`).setTimeout(WAIT.timeout).click()
      await page.waitForSelector('#stop:not([disabled])', WAIT)
      await page.click('#stop')
      await row(page, queued.id, 'cancelled')
      t.match(await getRun(app, queued.id, as), { status: 'cancelled', result: null }, 'it never started')
      for (const holder of holders) holder.release()
      for (const run of held) await settled(app, run.id, 15_000, as)
    })

  t.test('a synchronous run is listed and stopped; its output stays its own caller’s', async (t) => {
    const answer = fetch(`${base}/tools/gemini_run`, {
      method: 'POST',
      headers: { ...as, 'content-type': 'application/json' },
      body: JSON.stringify({ task: scenario.sleep(60000) })
    })
    const id = await page.waitForSelector('#runs tr[data-status="running"] .kind', WAIT).then(() =>
      page.waitForFunction(() => [...document.querySelectorAll('#runs tr')]
        .find((tr: any) => tr.textContent.includes('gemini_run'))?.dataset.id, WAIT))
      .then((handle) => handle.jsonValue() as Promise<string>)
    await page.locator(`#runs tr[data-id="${id}"] a`).setTimeout(WAIT.timeout).click()
    await page.waitForFunction(() => /its own caller/.test(document.querySelector('#run-note').textContent), WAIT)
    t.match(await page.$eval('#run-tool', (tool) => tool.textContent), 'gemini_run (sync)')
    await page.click('#stop')
    await page.waitForSelector('#run[data-status="cancelled"]', WAIT)
    t.match(await (await answer).json(), { stop_reason: 'cancelled' }, 'its caller got its result, cancelled')
    // Ended, it is no longer listed: a page opened on its link says so, without asking the API for it (a 404).
    await page.reload()
    await page.waitForFunction(() => /no longer kept/.test(document.querySelector('#run-empty').textContent), WAIT)
    t.equal(await page.evaluate(() => window.location.hash), `#run=${id}`)
    t.same(errors, [], 'no console error: nothing was asked of its events, nor of it once gone')
  })

  t.test('full slots, and the 429 they cause, show in the slots', async (t) => {
    await page.waitForSelector('#slots tr[data-tool="crush_run"][data-full="false"]', WAIT)
    const held = [heldAgent(t), heldAgent(t)]
    const runs = await Promise.all(held.map((agent) => createRun(app, { tool: 'crush_run', task: agent.task }, as)))
    const refused = await fetch(`${base}/runs`, {
      method: 'POST',
      headers: { ...as, 'content-type': 'application/json' },
      body: JSON.stringify({ tool: 'crush_run', task: 'one too many' })
    })
    t.equal(refused.status, 429)
    await page.waitForSelector('#slots tr[data-tool="crush_run"][data-full="true"]', WAIT)
    await page.waitForFunction(
      () => document.querySelector('#slots tr[data-tool="crush_run"] .refused')!.textContent === '1', WAIT
    )
    t.match(await page.$eval('#slots tr[data-tool="crush_run"]', (tr) => tr.textContent), /2 \/ 2 full/)
    for (const agent of held) agent.release()
    for (const run of runs) await settled(app, run.id, 10_000, as)
    await page.waitForSelector('#slots tr[data-tool="crush_run"][data-full="false"]', WAIT)
    t.same(errors, [], 'no console error')
  })

  t.test('readiness, with each agent’s version, and the containment mode', async (t) => {
    await page.waitForSelector('#agents tr[data-tool="claude_run"]', WAIT)
    t.match(await page.$eval('#agents tr[data-tool="claude_run"]', (tr) => tr.textContent), /claude_run\s*\S+/)
    t.match(await page.$eval('#containment', (p) => p.textContent), /process-group/)
  })

  t.test('a run’s webhook deliveries, with their attempts', async (t) => {
    const { url } = await webhookReceiver(t, () => 503)
    const run = await createRun(app, { tool: 'crush_run', task: 'notify me', webhook: { url } }, as)
    await (await page.waitForSelector(`#runs tr[data-id="${run.id}"] a`, WAIT))!.click()
    const line = await page.waitForSelector('#deliveries li[data-state="pending"]', WAIT)
    t.match(
      await line!.evaluate((item) => item.textContent), /^run\.finished: pending \(1 attempt, last: 503 at .+, next at/
    )
    t.match(await page.$eval('#deliveries-title', (title) => title.textContent), `Webhook to ${url}`)
  })

  t.test('readable on a phone: nothing wider than the screen', async (t) => {
    const width = 390
    await page.setViewport({ width, height: 844, isMobile: true, hasTouch: true })
    await page.waitForFunction(() => window.matchMedia('(max-width: 640px)').matches, WAIT)
    t.ok(await page.evaluate(() => document.documentElement.scrollWidth) <= width, 'no sideways scrolling')
    await page.screenshot({ path: fromRoot('docs/console-phone.png'), fullPage: true })
    await page.setViewport({ width: 1280, height: 720 })
  })

  t.test('keyboard: Close returns to the runs, Tab reaches a run, ' +
    'Enter opens it with the focus in its pane', async (t) => {
    await page.locator('#runs tr[data-status="running"] a').setTimeout(WAIT.timeout).click()
    await page.waitForSelector('#close-run', { ...WAIT, visible: true })
    await page.focus('#close-run')
    await page.keyboard.press('Enter')
    await page.waitForFunction(
      () => document.activeElement?.id === 'runs-title' && document.querySelector('#run-detail').hidden, WAIT
    )
    let presses = 0
    while (!await page.evaluate(() => document.activeElement?.matches('#runs a') === true)) {
      t.ok(++presses <= 5, 'a run is among the next stops of Tab')
      await page.keyboard.press('Tab')
    }
    const id = await page.evaluate(() => document.activeElement.closest('tr').dataset.id)
    await page.keyboard.press('Enter')
    await page.waitForFunction(() => document.activeElement?.id === 'run-title', WAIT)
    t.equal(await page.evaluate(() => window.location.hash), `#run=${id}`)
    t.equal(await page.$eval('#run-detail', (detail) => detail.hidden), false)
  })

  t.test('without tokens (loopback): no token to enter, runs are anonymous, ' +
    'and Stop passes the Origin check', async (t) => {
    const open = await build(t)
    const openBase = await listen(t, open)
    const other = await browser.newPage()
    t.teardown(() => other.close())
    const otherErrors: string[] = []
    other.on('console', (message: ConsoleMessage) => {
      if (message.type() === 'error') otherErrors.push(message.text())
    })
    await other.goto(`${openBase}/console`)
    await other.click('#login-form button')
    await other.waitForSelector('body[data-state="ready"]', WAIT)
    const run = await createRun(open, { tool: 'crush_run', task: scenario.sleep(60000) })
    await row(other, run.id, 'running')
    t.match(await other.$eval(`#runs tr[data-id="${run.id}"]`, (tr) => tr.textContent), /anonymous/)
    await other.locator(`#runs tr[data-id="${run.id}"] a`).setTimeout(WAIT.timeout).click()
    await other.waitForSelector('#stop:not([disabled])', WAIT)
    // The browser sends its Origin with a DELETE: the page's own must pass the check that refuses a rebound name's.
    await other.click('#stop')
    await other.waitForSelector('#run[data-status="cancelled"]', WAIT)
    t.same(otherErrors, [])
  })

  t.test('an API replica of a fleet shows its members: itself and the worker, with what each takes',
    { skip: NO_REDIS }, async (t) => {
      const { url } = await startRedis(t)
      const env = redisEnv(url, { API_TOKENS: `alice:${TOKEN}`, MAX_CRUSH_AGENTS: '2', WORKER_MAX_CRUSH_AGENTS: '1' })
      const [api] = await Promise.all([
        startServer(t, { ...env, ...NO_AGENT_HERE, ROLE: 'api' }),
        startServer(t, { ...env, ROLE: 'worker', AGENT_HOST_PLATFORM: 'win32' })
      ])
      const other = await browser.newPage()
      t.teardown(() => other.close())
      await other.goto(`${api.base}/console`)
      await other.type('#token', TOKEN)
      await other.click('#login-form button')
      const worker = await other.waitForSelector('#members tr[data-role="worker"]', WAIT)
      t.match(await worker!.evaluate((tr: any) => tr.textContent), /crush_run × 1.*\(WSL too\)/, 'what it takes')
      t.match(await other.$eval('#members tr[data-role="api"]', (tr) => tr.textContent), /api.*—/, 'the API replica')
      t.equal(await page.$eval('#fleet', (section) => section.hidden), true, 'a replica on its own shows no fleet')
    })

  t.test('the service gone: the page says it is unavailable and keeps trying', async (t) => {
    t.same(errors, [], 'no console error before')
    await app.close()
    await page.waitForSelector('body[data-state="unavailable"]', WAIT)
    t.match(await page.$eval('#status', (status) => status.textContent), /Service unavailable/)
  })
})

import t from 'tap'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { join } from 'node:path'
import { SqliteRunStore } from '#src/runs/stores/sqlite-store.js'
import { TaskState, type TaskPushNotificationConfig } from '@a2a-js/sdk'
import type { Client } from '@a2a-js/sdk/client'
import { a2aClient, a2aRefusal, a2aService, BINDINGS, sendMessage as send, userMessage } from '../helpers/a2a.js'
import { heldAgent, readPidFile, scenario, startServer, tempDir, until } from '../helpers/index.js'
import { webhookReceiver, type Received } from '../helpers/webhook-receiver.js'

// A2A push notifications through the service's webhook delivery: the client's URL and credentials, A2A's JSON, the
// same retries, durability and address policy as webhooks; no webhook secret needed (nothing is signed for them).

const ALICE = 'secret-a'
const LOOPBACK = { WEBHOOK_ALLOW_HOSTS: '127.0.0.0/8', WEBHOOK_RETRY_BASE_MS: '100' }
const RETENTION = { retentionMs: 60_000, maxFinished: 10, sessionsRetentionMs: 60_000, sessionsMaxPerOwner: 100 }

const pushConfig = (url: string, fields: Partial<TaskPushNotificationConfig> = {}): TaskPushNotificationConfig => ({
  tenant: '', id: '', taskId: '', url, token: '', authentication: undefined, ...fields
})

const sendWithPush = (client: Client, text: string, config: TaskPushNotificationConfig, returnImmediately = false) =>
  client.sendMessage({
    tenant: '',
    message: userMessage(text),
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: config, returnImmediately },
    metadata: undefined
  }) as ReturnType<typeof send>

const bodyOf = (received: Received): Record<string, any> => JSON.parse(received.body) as Record<string, any>

for (const binding of BINDINGS) {
  t.test(`${binding}: the task’s start and end go to the client’s URL, with its token, in A2A’s JSON`, async (t) => {
    const hook = await webhookReceiver(t, () => 200)
    const { base } = await a2aService(t, LOOPBACK)
    const client = await a2aClient(base, '/a2a/codex_run', ALICE, binding)
    const task = await sendWithPush(client, 'hello', pushConfig(hook.url, { id: 'cfg-1', token: 'tok-1' }))
    await until(() => hook.received.length, (count) => count >= 2, 10_000, 'the start and the end')
    const [started, finished] = hook.received
    for (const each of [started!, finished!]) {
      t.equal(each.headers['x-a2a-notification-token'], 'tok-1', 'the client’s token')
      t.match(each.headers['content-type'], /^application\/a2a\+json/)
      t.equal(each.headers['webhook-signature'], undefined, 'nothing signed: the token has no webhook secret')
    }
    t.match(bodyOf(started!), { statusUpdate: { taskId: task.id, status: { state: 'TASK_STATE_WORKING' } } })
    t.match(bodyOf(finished!), {
      task: { id: task.id, status: { state: 'TASK_STATE_COMPLETED' }, artifacts: [{ artifactId: 'answer' }] }
    })
    t.match(await client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'cfg-1' }),
      { id: 'cfg-1', taskId: task.id, url: hook.url, token: 'tok-1' }, 'the config reads back')
    t.same((await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' }))
      .configs.map((config) => config.id), ['cfg-1'])
    t.match(await a2aRefusal(client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'nope' })),
      { name: 'TaskNotFoundError' })
    t.match(await a2aRefusal(client.createTaskPushNotificationConfig(pushConfig(hook.url, { taskId: task.id }))),
      { name: 'UnsupportedOperationError', message: /ended/ }, 'an ended task has nothing more to tell')
  })

  t.test(`${binding}: a config added to a running task gets its status at once and its end; ` +
    'one deleted, nothing more',
  async (t) => {
    const added = await webhookReceiver(t, () => 200)
    const deleted = await webhookReceiver(t, () => 200)
    const { base } = await a2aService(t, LOOPBACK)
    const client = await a2aClient(base, '/a2a/codex_run', ALICE, binding)
    const held = heldAgent(t)
    const task = await send(client, userMessage(held.task), true)
    await readPidFile(held.pidFile)
    const config = pushConfig(added.url, { taskId: task.id, token: 't1' })
    const created = await client.createTaskPushNotificationConfig(config)
    t.match(created, { taskId: task.id, id: /^[0-9a-f-]{36}$/, url: added.url, token: 't1' })
    await client.createTaskPushNotificationConfig(pushConfig(deleted.url, { taskId: task.id, id: 'gone-soon' }))
    await until(() => added.received.length, (count) => count >= 1, 10_000, 'the task’s status, at once')
    t.match(bodyOf(added.received[0]!), {
      statusUpdate: { taskId: task.id, status: { state: 'TASK_STATE_WORKING' } }
    })
    const listing = { tenant: '', taskId: task.id, pageSize: 0, pageToken: '' }
    const listed = await client.listTaskPushNotificationConfig(listing)
    t.same(listed.configs.map((config) => config.id).sort(), [created.id, 'gone-soon'].sort())
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'gone-soon' })
    const deliveredBefore = deleted.received.length
    held.release()
    await until(() => added.received.length, (count) => count >= 2, 10_000, 'its end')
    t.match(bodyOf(added.received[1]!), { task: { id: task.id, status: { state: 'TASK_STATE_COMPLETED' } } })
    t.equal(added.received[1]!.headers['x-a2a-notification-token'], 't1')
    const deliveries = await until(
      async () => (await (await fetch(`${base}/runs/${task.id}/deliveries`, {
        headers: { authorization: `Bearer ${ALICE}` }
      })).json()) as { deliveries: Array<{ url: string; state: string; type: string }> },
      (found) => found.deliveries.filter((each) => each.url === added.url)
        .every((each) => each.state === 'delivered'),
      10_000, 'both of the added config’s delivered'
    )
    t.same(deliveries.deliveries.filter((each) => each.url === deleted.url && each.type === 'run.finished')
      .map((each) => each.state), ['gone'], 'the deleted config’s end was never sent')
    t.ok(deleted.received.length <= Math.max(deliveredBefore, 1), 'nothing after its deletion')
    t.match(await a2aRefusal(client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'nope' })),
      { name: 'TaskNotFoundError' })
  })
}

t.test('credentials go as A2A has them; a refused delivery is retried; the address policy holds', async (t) => {
  const hook = await webhookReceiver(t, (_request, index) => (index === 0 ? 503 : 200))
  const { base } = await a2aService(t, LOOPBACK)
  const client = await a2aClient(base, '/a2a/codex_run', ALICE)
  const authentication = { scheme: 'Bearer', credentials: 'the-receivers-own' }
  const task = await sendWithPush(client, 'hello', pushConfig(hook.url, { token: 'ignored', authentication }))
  await until(() => hook.received.length, (count) => count >= 3, 10_000, 'a refusal, then the start and the end')
  t.equal(hook.received[0]!.headers.authorization, 'Bearer the-receivers-own')
  t.equal(hook.received[0]!.headers['x-a2a-notification-token'], undefined, 'Authorization, not the token header')
  t.same(hook.received.slice(1).map((each) => Object.keys(bodyOf(each))[0]).sort(), ['statusUpdate', 'task'],
    'the refused one again, and the other')
  const listing = { tenant: '', taskId: task.id, pageSize: 0, pageToken: '' }
  const configs = await client.listTaskPushNotificationConfig(listing)
  t.match(configs.configs, [{ id: String, authentication }], 'an id given when the client gave none')

  const outside = await a2aService(t, {})
  const strict = await a2aClient(outside.base, '/a2a/codex_run', ALICE)
  t.match(await a2aRefusal(sendWithPush(strict, 'hello', pushConfig(hook.url))),
    { name: 'RequestMalformedError', code: 'WEBHOOK_URL_NOT_ALLOWED' }, 'loopback is not for pushes either')
  t.match(await a2aRefusal(sendWithPush(strict, 'hello', pushConfig(''))),
    { name: 'RequestMalformedError', code: 'VALIDATION_ERROR' })
  const listed = (await (await fetch(`${outside.base}/runs`, { headers: { authorization: `Bearer ${ALICE}` } })).json())
  t.same(listed, { runs: [] }, 'nothing started for them')
})

t.test('SQLite: a task whose service was SIGKILLed mid-run is pushed as failed by the next start', async (t) => {
  const hook = await webhookReceiver(t, () => 200)
  const dataDir = tempDir(t)
  const env = { ...LOOPBACK, DATA_DIR: dataDir, API_TOKENS: 'alice:secret-a' }
  const first = await startServer(t, env)
  const client = await a2aClient(first.base, '/a2a/crush_run', ALICE)
  const pidFile = join(tempDir(t), 'agent.pid')
  const task = await sendWithPush(client, scenario.writePid(pidFile, 600_000), pushConfig(hook.url), true)
  await readPidFile(pidFile)
  await until(() => hook.received.length, (count) => count === 1, 10_000, 'its start')
  const exited = once(first.child, 'exit')
  first.child.kill('SIGKILL')
  await exited
  await startServer(t, env)
  const failed = (received: Received): boolean => bodyOf(received)['task']?.status?.state === 'TASK_STATE_FAILED'
  const delivered = await until(() => [...hook.received], (all) => all.some(failed), 10_000, 'the lost task’s end')
  // At least once: a start the receiver took just before the kill, not yet marked sent, is sent again when it restarts.
  t.ok(delivered.filter((received) => !failed(received)).every((received) =>
    bodyOf(received)['statusUpdate']?.status?.state === 'TASK_STATE_WORKING'), 'besides its end, only its start')
  t.equal(delivered.filter(failed).length, 1)
  t.match(bodyOf(delivered.find(failed)!), {
    task: {
      id: task.id,
      status: { state: 'TASK_STATE_FAILED', message: { parts: [{ text: /died/ }] } },
      metadata: { run: { status: 'lost' } }
    }
  })
  t.equal(task.status?.state, TaskState.TASK_STATE_WORKING)
})

t.test('a receiver’s credentials that cannot be a header (CR, LF, a space, a control) are refused as given, ' +
  'on both bindings and both doors; nothing starts', async (t) => {
  const hook = await webhookReceiver(t, () => 200)
  const { base } = await a2aService(t, LOOPBACK)
  const held = heldAgent(t)
  for (const binding of BINDINGS) {
    const client = await a2aClient(base, '/a2a/codex_run', ALICE, binding)
    const hostile: Array<[string, Partial<TaskPushNotificationConfig>, RegExp]> = [
      ['a token with CR/LF', { token: 'tok\r\nx-injected: yes' }, /token: visible ASCII/],
      ['a token with a space', { token: 'two words' }, /token/],
      ['a scheme with LF', { authentication: { scheme: 'Bearer\nx: y', credentials: 'c' } },
        /scheme: an RFC 9110 token/],
      ['credentials with CR/LF', { authentication: { scheme: 'Bearer', credentials: 'c\r\nx: y' } }, /credentials/],
      ['non-ASCII credentials', { authentication: { scheme: 'Bearer', credentials: 'clé' } }, /credentials/],
      ['a token too long', { token: 'x'.repeat(4097) }, /at most 4096/]
    ]
    for (const [what, fields, message] of hostile) {
      t.match(await a2aRefusal(sendWithPush(client, 'hello', pushConfig(hook.url, fields))),
        { name: 'RequestMalformedError', code: 'VALIDATION_ERROR', message }, `${binding}: ${what}, with the message`)
    }
    const running = await sendWithPush(client, held.task, pushConfig(hook.url), true)
    t.match(await a2aRefusal(client.createTaskPushNotificationConfig(
      pushConfig(hook.url, { taskId: running.id, token: 'tok\r\nx-injected: yes' }))),
    { name: 'RequestMalformedError', code: 'VALIDATION_ERROR', message: /taskPushNotificationConfig\/token/ },
    `${binding}: added to a running task`)
    t.match(await client.createTaskPushNotificationConfig(pushConfig(hook.url, {
      taskId: running.id, authentication: { scheme: 'Basic', credentials: 'dXNlcjpwYXNz==' }
    })), { taskId: running.id }, `${binding}: RFC 9110's forms are taken`)
  }
  held.release()
  const listed = await (await fetch(`${base}/runs`, { headers: { authorization: `Bearer ${ALICE}` } })).json() as {
    runs: unknown[]
  }
  t.equal(listed.runs.length, BINDINGS.length, 'only the held tasks started')
})

t.test('a task takes at most 10 push configs; one given again by id replaces nothing new', async (t) => {
  const hook = await webhookReceiver(t, () => 200)
  const { base } = await a2aService(t, LOOPBACK)
  const client = await a2aClient(base, '/a2a/codex_run', ALICE)
  const held = heldAgent(t)
  const running = await sendWithPush(client, held.task, pushConfig(hook.url, { id: 'cfg-0' }), true)
  await readPidFile(held.pidFile)
  for (let index = 1; index < 10; index++) {
    await client.createTaskPushNotificationConfig(pushConfig(hook.url, { taskId: running.id, id: `cfg-${index}` }))
  }
  t.match(await a2aRefusal(client.createTaskPushNotificationConfig(
    pushConfig(hook.url, { taskId: running.id, id: 'cfg-10' }))),
  { name: 'RequestMalformedError', code: 'VALIDATION_ERROR', message: /at most 10 push configs/ })
  t.match(await client.createTaskPushNotificationConfig(pushConfig(hook.url, { taskId: running.id, id: 'cfg-3' })),
    { id: 'cfg-3' }, 'an existing config given again')
  await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: running.id, id: 'cfg-0' })
  t.match(await client.createTaskPushNotificationConfig(pushConfig(hook.url, { taskId: running.id, id: 'cfg-10' })),
    { id: 'cfg-10' }, 'room again once one is deleted')
  held.release()
})

t.test('a delivery whose headers Node will not send fails its attempts and is given up; the service lives',
  async (t) => {
    const hook = await webhookReceiver(t, () => 200)
    const dataDir = tempDir(t)
    // As an earlier version accepted it: planted in the store the service starts on, due now.
    const earlier = new SqliteRunStore(dataDir, RETENTION, 'earlier-life')
    const run = randomUUID()
    const now = new Date().toISOString()
    const headers = { 'x-a2a-notification-token': 'tok\r\nx-injected: yes' }
    await earlier.outbox.addDeliveries([{
      id: `msg_${randomUUID()}`,
      run,
      caller: 'alice',
      type: 'run.finished',
      url: hook.url,
      body: '{}',
      createdAt: now,
      replica: 'earlier-life',
      state: 'pending',
      attempts: [],
      nextAttemptAt: now,
      push: { config: 'cfg', headers, lostBody: null }
    }])
    await earlier.close()
    const service = await startServer(t, {
      ...LOOPBACK, WEBHOOK_RETRY_FOR_MS: '1000', DATA_DIR: dataDir, API_TOKENS: 'alice:secret-a'
    })
    const reader = new SqliteRunStore(dataDir, RETENTION, 'reader')
    t.teardown(() => reader.close())
    const [ended] = await until(() => reader.outbox.deliveriesOf(run), ([delivery]) => delivery?.state === 'given_up',
      20_000, 'the delivery given up')
    t.ok(ended!.attempts.length >= 1, `${String(ended!.attempts.length)} attempts, each failed`)
    t.match(ended!.attempts[0], { status: null, error: /invalid character/i })
    t.equal(hook.received.length, 0, 'nothing reached the receiver')
    t.equal(service.child.exitCode, null, 'the service is still running')
    t.equal((await fetch(`${service.base}/healthz`)).status, 200, 'and answers')
  })

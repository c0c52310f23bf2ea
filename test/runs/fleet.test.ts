import t from 'tap'
import { TaskState, type StreamResponse } from '@a2a-js/sdk'
import { once } from 'node:events'
import { join } from 'node:path'
import {
  build, call, cancelRun, createRun, echoed, heldAgent, isAlive, listen, outputText, parseSse, readPidFile, readUntil,
  refused, runTool, scenario, settled, startServer, tempDir, until
} from '../helpers/index.js'
import { NO_REDIS, redisEnv, startRedis } from '../helpers/redis.js'
import { a2aClient, allTasks, sendMessage, userMessage } from '../helpers/a2a.js'
import { webhookReceiver } from '../helpers/webhook-receiver.js'

// Two real service processes on one real redis-server: any replica answers for any run.

const ALICE = { authorization: 'Bearer alice-secret' }
const BOB = { authorization: 'Bearer bob-secret' }
const TOKENS = 'alice:alice-secret,bob:bob-secret'

// Each test with a Redis and services of its own: two at a time.
t.test('a fleet on Redis', { skip: NO_REDIS, jobs: 2 }, async (t) => {
  t.test('POST on A; GET, follow live and DELETE on B; the agent on A stops; other tokens see nothing', async (t) => {
    const { url } = await startRedis(t)
    const env = redisEnv(url, { API_TOKENS: TOKENS })
    // Two lives of the service, started side by side.
    const [a, b] = await Promise.all([startServer(t, env), startServer(t, env)])
    const pidFile = join(tempDir(t), 'agent.pid')
    const task = scenario.drip(100000, 20, pidFile)
    const { id } = await createRun(a.base, { tool: 'crush_run', task }, ALICE)
    const agent = await readPidFile(pidFile)

    t.match(
      await call(b.base, 'GET', `/runs/${id}`, { headers: ALICE }),
      { status: 200, body: { id, kind: 'async', status: 'running', result: null } }, 'B knows the run A runs'
    )
    const following = await fetch(`${b.base}/runs/${id}/events`, { headers: ALICE })
    t.equal(following.status, 200)
    const seen = await readUntil(following, /tick 3\\n/)
    t.match(
      seen, /^id: \d+\nevent: output\ndata: \{"type":"output","id":\d+,"offset":0,"data":"tick 1\\n/, 'from the start…'
    )
    t.match(seen, /tick 3/, '…and live, as A writes it')

    t.match(
      await call(b.base, 'GET', `/runs/${id}`, { headers: BOB }), { status: 404, body: { code: 'RUN_NOT_FOUND' } },
      'another token: no such run'
    )
    t.same((await call(b.base, 'GET', '/runs', { headers: BOB })).body, { runs: [] }, 'and an empty list')
    t.match(
      await call(b.base, 'GET', '/runs', { headers: ALICE }),
      { body: { runs: [{ id, status: 'running', caller: 'alice', task, deadline: String }] } },
      'B lists it as A does: what a console on any replica shows'
    )

    t.match(
      await cancelRun(b.base, id, ALICE), { id, status: 'cancelled', result: { stop_reason: 'cancelled' } },
      'B answers with the end A recorded'
    )
    t.notOk(isAlive(agent), 'the agent on A is gone')
    t.match(
      await call(a.base, 'GET', `/runs/${id}`, { headers: ALICE }), { body: { status: 'cancelled' } }, 'A says the same'
    )
  })

  t.test('a session one replica’s run reported is continued on another, by its owner only, ' +
    'one run at a time', async (t) => {
    const { url } = await startRedis(t)
    const env = redisEnv(url, { API_TOKENS: TOKENS })
    const [a, b] = await Promise.all([startServer(t, env), startServer(t, env)])
    // The agents' HOME is the same here, as a fleet's must be for its CLIs to find their sessions on every replica.
    const first = await runTool(a.base, 'codex_run', { task: 'first on A' }, ALICE)
    const held = heldAgent(t)
    const continuing = runTool(b.base, 'codex_run', { task: held.task, resume: first.session_id! }, ALICE)
    await readPidFile(held.pidFile)
    t.match(
      await refused(a.base, 'codex_run', { task: 'me too', resume: first.session_id }, ALICE),
      { status: 409, body: { code: 'SESSION_BUSY' } }, 'A sees B’s claim'
    )
    t.match(await refused(a.base, 'codex_run', { task: 'mine?', resume: first.session_id }, BOB), {
      status: 404, body: { code: 'SESSION_NOT_FOUND' }
    })
    held.release()
    t.match(await continuing, { ok: true, session_id: first.session_id })
    const third = await runTool(b.base, 'codex_run', { task: 'third on B', resume: first.session_id! }, ALICE)
    t.same(
      (echoed(third) as ReturnType<typeof echoed> & { earlier: string[] }).earlier, ['first on A', held.task],
      'B’s runs were given A’s conversation'
    )
  })

  t.test('kill -9 A: after the TTL, B reports A’s run lost, with the events A had saved', async (t) => {
    const { url } = await startRedis(t)
    const env = redisEnv(url, { SLOTS_TTL_MS: '600' })
    const [a, b] = await Promise.all([startServer(t, env), startServer(t, env)])
    const pidFile = join(tempDir(t), 'agent.pid')
    const { id } = await createRun(a.base, { tool: 'crush_run', task: scenario.drip(100000, 20, pidFile) })
    const agent = await readPidFile(pidFile)
    t.teardown(() => isAlive(agent) && process.kill(-agent, 'SIGKILL'))
    // Saved events show on B: what A had written by then is in Redis.
    await readUntil(await fetch(`${b.base}/runs/${id}/events`), /tick 2/)
    const exited = once(a.child, 'exit')
    a.child.kill('SIGKILL')
    await exited

    // Polled as a caller would: running until A's liveness lapses (its TTL), then lost.
    t.match(await settled(b.base, id), { id, status: 'lost', finished_at: String, result: null })
    const kept = await (await fetch(`${b.base}/runs/${id}/events`)).text()
    t.match(kept, /"offset":0,"data":"tick 1\\n/, 'the output A had saved')
    t.notMatch(kept, /event: result/)
  })

  t.test('in one process pair: ' +
    'B follows A’s run live to its end and DELETE of a finished run answers it as it is', async (t) => {
    const { url } = await startRedis(t)
    const env = redisEnv(url)
    const a = await build(t, env)
    const b = await build(t, env)
    const { id } = await createRun(a, { tool: 'crush_run', task: scenario.drip(5, 100) })
    const followed = await (await fetch(`${await listen(t, b)}/runs/${id}/events`)).text()
    t.equal(
      outputText(parseSse(followed).map((frame) => frame.data)), 'tick 1\ntick 2\ntick 3\ntick 4\ntick 5\ndripped\n',
      'every byte of output, as A saved it while it ran'
    )
    t.match(
      followed, /event: result\ndata: \{"type":"result","id":\d+,"result":\{"tool":"crush_run","ok":true/,
      'then the result'
    )
    t.match(await cancelRun(b, id), { id, status: 'succeeded' }, 'a finished run is answered as it is')
  })

  t.test('in one process pair: DELETE on B waits for A to stop the agent and record its end', async (t) => {
    const { url } = await startRedis(t)
    const env = redisEnv(url, { AGENT_KILL_GRACE_MS: '200' })
    const a = await build(t, env)
    const b = await build(t, env)
    const pidFile = join(tempDir(t), 'agent.pid')
    const { id } = await createRun(a, { tool: 'crush_run', task: scenario.grandchild(pidFile, { stubborn: true }) })
    const grandchild = await readPidFile(pidFile)
    t.match(await cancelRun(b, id), {
      id, status: 'cancelled', finished_at: String, result: { stop_reason: 'cancelled' }
    })
    t.notOk(isAlive(grandchild), 'the stubborn grandchild on A is gone too')
  })

  t.test('A2A: a task sent to A is read, followed, listed, continued and cancelled on B, by its owner only; ' +
    'a push config added on B gets the end A records', async (t) => {
    const { url } = await startRedis(t)
    const env = redisEnv(url, { API_TOKENS: TOKENS, WEBHOOK_ALLOW_HOSTS: '127.0.0.0/8', WEBHOOK_RETRY_BASE_MS: '100' })
    const [a, b] = await Promise.all([startServer(t, env), startServer(t, env)])
    const onA = await a2aClient(a.base, '/a2a/claude_run', 'alice-secret')
    const onB = await a2aClient(b.base, '/a2a/claude_run', 'alice-secret', 'HTTP+JSON')
    // Its agent makes its calls and runs on until B has followed them: B reads it working, however slow the machine
    // (steps B never saw leave it to its deadline).
    const working = heldAgent(t, { calls: 3 })
    const task = await sendMessage(onA, userMessage(working.task, { timeout: 30 }), true)
    await readPidFile(working.pidFile)
    t.equal((await onB.getTask({ tenant: '', id: task.id })).status?.state, TaskState.TASK_STATE_WORKING,
      'B knows the task A runs')
    const events: StreamResponse[] = []
    const updates = () => events.filter((event) => event.payload?.$case === 'statusUpdate').length
    for await (const event of onB.resubscribeTask({ tenant: '', id: task.id })) {
      events.push(event)
      if (updates() > 2) working.release()
    }
    t.ok(updates() > 2, 'its steps, from B')
    t.match(events.at(-1)?.payload, { value: { status: { state: TaskState.TASK_STATE_COMPLETED } } }, 'to its end')
    const listRequest = allTasks()
    t.same((await onB.listTasks(listRequest)).tasks.map((each) => each.id), [task.id])
    const bobOnB = await a2aClient(b.base, '/a2a/claude_run', 'bob-secret')
    t.same((await bobOnB.listTasks(listRequest)).tasks, [], 'nothing of alice’s for bob')

    const followUp = await sendMessage(onB, { ...userMessage('go on'), contextId: task.contextId })
    t.equal(followUp.contextId, task.contextId, 'a context A opened goes on on B')
    t.equal(followUp.status?.state, TaskState.TASK_STATE_COMPLETED)

    const held = heldAgent(t)
    const long = await sendMessage(onA, userMessage(held.task), true)
    const agent = await readPidFile(held.pidFile)
    const hook = await webhookReceiver(t, () => 200)
    await onB.createTaskPushNotificationConfig({
      tenant: '', id: 'on-b', taskId: long.id, url: hook.url, token: 'b', authentication: undefined
    })
    t.equal((await onB.cancelTask({ tenant: '', id: long.id, metadata: undefined })).status?.state,
      TaskState.TASK_STATE_CANCELED, 'B cancels what A runs')
    t.notOk(isAlive(agent), 'the agent on A is gone')
    await until(() => hook.received.length, (count) => count >= 2, 10_000, 'the status at once, then the end')
    const ends = hook.received.map((each) => JSON.parse(each.body) as { task?: { status: { state: string } } })
    t.ok(ends.some((body) => body.task?.status.state === 'TASK_STATE_CANCELED'), 'the end A recorded, pushed')
  })
})

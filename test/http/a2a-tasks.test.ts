import t from 'tap'
import { TaskState } from '@a2a-js/sdk'
import { endUpdates, taskOf, taskStateOf } from '#src/http/a2a/tasks.js'
import type { RunResult } from '#src/schemas/run.js'
import type { RunState } from '#src/schemas/runs.js'
import { a2aClient, a2aService, sendMessage as send, userMessage } from '../helpers/a2a.js'
import { heldAgent, readPidFile, until } from '../helpers/index.js'
import { runResult } from '../helpers/results.js'

// A run as an A2A task: the state table docs/a2a.md gives, what a task carries, and the queue's states for real.

const result = (fields: Partial<RunResult> = {}): RunResult => runResult({ tool: 'claude_run', ...fields })

const state = (fields: Partial<RunState>): RunState => ({
  id: 'r1',
  tool: 'claude_run',
  kind: 'async',
  status: 'running',
  caller: 'alice',
  task: 'x',
  created_at: '2026-12-03T10:00:00.000Z',
  deadline: null,
  finished_at: null,
  result: null,
  ...fields
})

t.test('the state table: every run status, and a run refused before its agent started', async (t) => {
  const ended = { finished_at: '2026-12-03T10:01:00.000Z' }
  const table: Array<[Partial<RunState>, TaskState]> = [
    [{ status: 'queued', queue_position: 2 }, TaskState.TASK_STATE_SUBMITTED],
    [{ status: 'running' }, TaskState.TASK_STATE_WORKING],
    [{ status: 'succeeded', result: result(), ...ended }, TaskState.TASK_STATE_COMPLETED],
    [{ status: 'failed', result: result({ ok: false, exit_code: 1 }), ...ended }, TaskState.TASK_STATE_FAILED],
    [{ status: 'timed_out', result: result({ stop_reason: 'timeout' }), ...ended }, TaskState.TASK_STATE_FAILED],
    [{ status: 'lost', ...ended }, TaskState.TASK_STATE_FAILED],
    [{ status: 'cancelled', result: result({ stop_reason: 'cancelled' }), ...ended }, TaskState.TASK_STATE_CANCELED],
    [
      { status: 'cancelled', error: { code: 'SHUTTING_DOWN', message: 'closing' }, ...ended },
      TaskState.TASK_STATE_CANCELED
    ],
    [
      { status: 'failed', error: { code: 'QUEUE_TIMED_OUT', message: 'waited' }, ...ended },
      TaskState.TASK_STATE_REJECTED
    ]
  ]
  for (const [fields, expected] of table) {
    t.equal(taskStateOf(state(fields)), expected, `${fields.status!}${fields.error ? ` (${fields.error.code})` : ''}`)
  }
})

t.test('what a task says of its run: why it did not go well, its artifacts, its record', async (t) => {
  const text = (fields: Partial<RunState>) => {
    const part = taskOf(state(fields)).status?.message?.parts[0]?.content
    return part?.$case === 'text' ? part.value : undefined
  }
  t.equal(text({ status: 'queued', queue_position: 3 }), 'queued: waiting for a slot, position 3')
  t.equal(text({ status: 'running' }), undefined, 'nothing to say of a run going on')
  t.equal(text({ status: 'succeeded', result: result() }), undefined, 'nor of one that went well')
  t.equal(text({ status: 'failed', result: result({ ok: false, exit_code: 2 }) }), 'The agent ended with exit code 2.')
  t.equal(text({ status: 'failed', result: result({ ok: false, exit_code: null, signal: 'SIGKILL' }) }),
    'The agent was ended by SIGKILL.')
  t.equal(text({ status: 'failed', result: result({ ok: false, stop_reason: 'max_turns' }) }),
    'The agent was stopped: max_turns.')
  const missed = { code: 'OUTPUT_SCHEMA_MISMATCH', message: 'no JSON' } as RunResult['error']
  t.equal(text({ status: 'failed', result: result({ ok: false, error: missed }) }), 'no JSON')
  t.equal(text({ status: 'lost' }), 'The service running the agent died before it ended.')
  t.equal(text({ status: 'failed', error: { code: 'QUEUE_TIMED_OUT', message: 'waited 5 s' } }), 'waited 5 s')

  const changes: RunResult['changes'] = {
    worktree: null, branch: null, base: 'abc', head: null, files: [], diff: '', diff_bytes: 0, diff_truncated: false
  }
  const full = state({
    status: 'succeeded',
    result: result({ changes, structured_output: { verdict: 'ok' } }),
    finished_at: '2026-12-03T10:01:00.000Z'
  })
  const task = taskOf(full)
  t.same(task.artifacts.map((artifact) => artifact.artifactId), ['answer', 'changes', 'structured_output'])
  t.match(task.artifacts[1]!.parts[0]!.content, { $case: 'data', value: { base: 'abc' } })
  t.match(task.artifacts[2]!.parts[0]!.content, { $case: 'data', value: { verdict: 'ok' } })
  t.match(task.metadata, { run: { id: 'r1', status: 'succeeded' }, result: { ok: true } })
  t.notOk('output' in (task.metadata!['result'] as object), 'what the artifacts hold is not repeated')
  t.equal(task.status?.timestamp, full.finished_at, 'its status is as of its end')
  t.same(taskOf(full, 0).history, [], 'historyLength 0')
  t.equal(taskOf(full, 5).history.length, 1, 'its answer')
  const updates = endUpdates(full).map((update) => update.payload?.$case)
  t.same(updates, ['artifactUpdate', 'artifactUpdate', 'artifactUpdate', 'statusUpdate'], 'artifacts, then the end')
  t.equal(taskOf(state({ context_id: 'c1' })).contextId, 'c1', 'a task continuing a context is in it')
})

t.test('queued runs are SUBMITTED tasks; cancelled there, CANCELED; their wait over, REJECTED', async (t) => {
  const { base } = await a2aService(t, { MAX_CODEX_AGENTS: '1' })
  const client = await a2aClient(base, '/a2a/codex_run', 'secret-a')
  const held = heldAgent(t)
  await send(client, userMessage(held.task), true)
  await readPidFile(held.pidFile)
  const waiting = await send(client, userMessage('after it', { queue_timeout: 60 }), true)
  t.equal(waiting.status?.state, TaskState.TASK_STATE_SUBMITTED)
  t.match(waiting.status?.message?.parts[0]?.content, { value: 'queued: waiting for a slot, position 1' })
  const cancelled = await client.cancelTask({ tenant: '', id: waiting.id, metadata: undefined })
  t.equal(cancelled.status?.state, TaskState.TASK_STATE_CANCELED)
  const refused = await send(client, userMessage('no room', { queue_timeout: 1 }), true)
  const rejected = await until(
    () => client.getTask({ tenant: '', id: refused.id }),
    (task) => task.status?.state !== TaskState.TASK_STATE_SUBMITTED, 10_000, 'its wait to end'
  )
  t.equal(rejected.status?.state, TaskState.TASK_STATE_REJECTED)
  t.match(rejected.status?.message?.parts[1]?.content, { $case: 'data', value: { code: 'QUEUE_TIMED_OUT' } })
  held.release()
})

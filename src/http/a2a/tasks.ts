import { Role, StreamResponse, TaskState, type Artifact, type Message, type Part, type Task } from '@a2a-js/sdk'
import type { RunEvent } from '../../schemas/events.js'
import type { RunResult } from '../../schemas/run.js'
import type { RunState } from '../../schemas/runs.js'
import { stepLine } from '../step-line.js'

/**
 * A run's status as an A2A task state (docs/a2a.md has the table). A run that ended before its agent started (its wait
 * in the queue over, the service shutting down) was refused, not failed: REJECTED; one stopped while it waited was
 * cancelled all the same.
 */
export function taskStateOf(state: Pick<RunState, 'status' | 'result' | 'error'>): TaskState {
  switch (state.status) {
    case 'queued':
      return TaskState.TASK_STATE_SUBMITTED
    case 'running':
      return TaskState.TASK_STATE_WORKING
    case 'succeeded':
      return TaskState.TASK_STATE_COMPLETED
    case 'cancelled':
      return TaskState.TASK_STATE_CANCELED
    case 'failed':
      return state.result === null && state.error !== undefined
        ? TaskState.TASK_STATE_REJECTED
        : TaskState.TASK_STATE_FAILED
    case 'timed_out':
    case 'lost':
      return TaskState.TASK_STATE_FAILED
  }
}

const TERMINAL = new Set([
  TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED
])

export const isTerminal = (state: TaskState): boolean => TERMINAL.has(state)

const textPart = (text: string): Part =>
  ({ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' })

const dataPart = (value: unknown): Part =>
  ({ content: { $case: 'data', value }, metadata: undefined, filename: '', mediaType: 'application/json' })

/** A task's place in a conversation: the context it continues, else its own (it is the first task of one). */
export const contextOf = (state: TaskRef): string => state.context_id ?? state.id

/** What names a task and its context. */
type TaskRef = Pick<RunState, 'id' | 'context_id'>

function agentMessage(state: TaskRef, messageId: string, parts: Part[]): Message {
  return {
    messageId: `${state.id}:${messageId}`,
    contextId: contextOf(state),
    taskId: state.id,
    role: Role.ROLE_AGENT,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: []
  }
}

/** Why a run is where it is, for the people a client shows it to; nothing for one that went well or is running. */
function statusText(state: RunState): string | undefined {
  if (state.status === 'queued') return `queued: waiting for a slot, position ${String(state.queue_position ?? '?')}`
  if (state.error !== undefined) return state.error.message
  if (state.status === 'lost') return 'The service running the agent died before it ended.'
  const result = state.result
  if (result === null || state.status === 'succeeded' || state.status === 'running') return undefined
  if (result.stop_reason !== null) return `The agent was stopped: ${result.stop_reason}.`
  if (result.error !== null) return result.error.message
  return result.exit_code === null
    ? `The agent was ended by ${String(result.signal)}.`
    : `The agent ended with exit code ${String(result.exit_code)}.`
}

function statusMessage(state: RunState): Message | undefined {
  const text = statusText(state)
  if (text === undefined) return undefined
  const parts = [textPart(text), ...(state.error === undefined ? [] : [dataPart(state.error)])]
  return agentMessage(state, `status:${state.status}`, parts)
}

function artifact(artifactId: string, description: string, parts: Part[]): Artifact {
  return { artifactId, name: artifactId, description, parts, metadata: undefined, extensions: [] }
}

/** What a run produced, as artifacts: its answer, and its changeset and structured output when it has them. */
function artifactsOf(result: RunResult | null): Artifact[] {
  if (result === null) return []
  const artifacts = [
    artifact('answer', 'What the agent answered: its report’s text, else its output.', [textPart(result.output)])
  ]
  if (result.changes !== null) {
    artifacts.push(artifact('changes', 'What the agent changed in its worktree (files, diff, branch).', [
      dataPart(result.changes)
    ]))
  }
  if (result.structured_output !== null) {
    const description = 'The JSON object the answer ended with, valid against output_schema.'
    artifacts.push(artifact('structured_output', description, [dataPart(result.structured_output)]))
  }
  return artifacts
}

/** The run's own record beside the task: its state without the result, and the result without what artifacts hold. */
function runMetadata(state: RunState): Record<string, unknown> {
  const { result, ...run } = state
  if (result === null) return { run, result: null }
  const { output: _output, changes: _changes, structured_output: _structured, ...rest } = result
  return { run, result: rest }
}

/**
 * A run as an A2A task. Its history is the agent's answer once there is one (the task's own text is kept only as an
 * excerpt, and what the agent did streams as status messages): at most `historyLength` messages.
 */
export function taskOf(state: RunState, historyLength?: number): Task {
  const answer = state.result === null ? [] : [agentMessage(state, 'answer', [textPart(state.result.output)])]
  return {
    id: state.id,
    contextId: contextOf(state),
    status: {
      state: taskStateOf(state),
      message: statusMessage(state),
      timestamp: state.finished_at ?? state.created_at
    },
    artifacts: artifactsOf(state.result),
    history: historyLength === undefined ? answer : answer.slice(Math.max(0, answer.length - historyLength)),
    metadata: runMetadata(state)
  }
}

/** One step of a running task, as a status message: a line people read and the step itself for programs. */
export function stepUpdate(state: TaskRef, event: Extract<RunEvent, { type: 'step' }>): StreamResponse {
  const eventId = event.id ?? ''
  return {
    payload: {
      $case: 'statusUpdate',
      value: {
        taskId: state.id,
        contextId: contextOf(state),
        status: {
          state: TaskState.TASK_STATE_WORKING,
          message: agentMessage(state, `step:${eventId}`, [textPart(stepLine(event.step)), dataPart(event.step)]),
          timestamp: new Date().toISOString()
        },
        // Where a subscriber that lost its stream resumes from (Last-Event-ID), as on /runs/{id}/events.
        metadata: { event_id: eventId }
      }
    }
  }
}

/** A run that ended: each of its artifacts, then its final status. */
export function endUpdates(state: RunState): StreamResponse[] {
  const artifacts = artifactsOf(state.result).map((each): StreamResponse => ({
    payload: {
      $case: 'artifactUpdate',
      value: {
        taskId: state.id,
        contextId: contextOf(state),
        artifact: each,
        append: false,
        lastChunk: true,
        metadata: undefined
      }
    }
  }))
  const { status } = taskOf(state)
  return [
    ...artifacts,
    {
      payload: {
        $case: 'statusUpdate',
        value: { taskId: state.id, contextId: contextOf(state), status, metadata: runMetadata(state) }
      }
    }
  ]
}

export const taskEvent = (task: Task): StreamResponse => ({ payload: { $case: 'task', value: task } })

/**
 * A push notification's body, A2A's StreamResponse JSON: as the task starts, a WORKING status update; as it ends (or is
 * lost), the whole task, its artifacts with it.
 */
export function pushBody(moment: 'started' | 'finished', state: RunState): string {
  const event: StreamResponse = moment === 'finished'
    ? taskEvent(taskOf(state))
    : {
        payload: {
          $case: 'statusUpdate',
          value: {
            taskId: state.id, contextId: contextOf(state), status: taskOf(state).status, metadata: runMetadata(state)
          }
        }
      }
  return JSON.stringify(StreamResponse.toJSON(event))
}

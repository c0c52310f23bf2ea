import { Type, type Static } from '@sinclair/typebox'
import { ref } from './ref.js'
import { RunParams, RunResult } from './run.js'
import { ToolName } from './tool-name.js'
import { RunLimits } from './limits.js'
import { ListedWebhook } from './webhooks.js'
import { RunWorkspace } from './workspace.js'

/** Why a run accepted (202) ended without its agent: its wait in the queue over, or stopped while it waited. */
export const RunError = Type.Object({
  code: Type.String({ description: 'The code a synchronous run would have been refused with (`QUEUE_TIMED_OUT`…).' }),
  message: Type.String()
}, { description: 'Why the run ended before its agent started.' })
export type RunError = Static<typeof RunError>

export const RunStatus = Type.Union(
  [
    Type.Literal('queued'),
    Type.Literal('running'),
    Type.Literal('succeeded'),
    Type.Literal('failed'),
    Type.Literal('timed_out'),
    Type.Literal('cancelled'),
    Type.Literal('lost')
  ],
  {
    description:
      'queued while it waits for a slot (`queue_timeout`); running until the agent ends; then how it ended. ' +
      'cancelled: DELETE, or the service shutting down. lost: the service running it died (crash, kill -9, its ' +
      'replica gone) — the events it had saved are still there.'
  }
)
export type RunStatus = Static<typeof RunStatus>

/** Chosen by each follower of an async run (GET /runs/{id}/events?events=), not by the run. */
const { events: _events, ...asyncRunParams } = RunParams.properties

/** POST /runs: the same fields as the tool routes, plus which tool (one of the agents this service runs). */
export function runRequestSchema(toolNames: readonly string[]) {
  return Type.Object(
    {
      tool: ToolName(toolNames, 'Which agent runs the task.'),
      ...asyncRunParams
    },
    {
      $id: 'RunRequest',
      title: 'RunRequest',
      additionalProperties: false,
      dependencies: { wsl_user: ['wsl_distro'] },
      description: 'An asynchronous run: the tool and the same parameters as POST /tools/{tool}.',
      examples: [{ tool: 'claude_run', task: 'Add tests for src/parser.ts', cwd: '/tmp', timeout: 1800 }]
    }
  )
}
/** `Tool`: the union of tool names where the catalog is known (schemas/ knows no agent). */
export type RunRequest<Tool extends string = string> = Omit<Static<typeof RunParams>, 'events'> & { tool: Tool }

const runStateProperties = {
  id: Type.String({ description: 'The run id, for /runs/{id}.' }),
  tool: Type.String(),
  kind: Type.Union([Type.Literal('sync'), Type.Literal('stream'), Type.Literal('async')], {
    description:
      'How it was started: POST /tools/{tool} (sync, or stream when it streams its events) or POST /runs (async). ' +
      'Synchronous and streamed runs are listed only while they run; their output and result go to their own ' +
      'response.'
  }),
  status: RunStatus,
  caller: Type.String({ description: 'The name of the token that started it (`anonymous` without tokens).' }),
  task: Type.Union([Type.String(), Type.Null()], {
    description: 'The first 200 characters of its task (… when longer); null for a run stored by an older version.'
  }),
  created_at: Type.String({ format: 'date-time' }),
  deadline: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description:
      'When its timeout stops it (its agent’s start plus `timeout`); null for a run stored by an older version.'
  }),
  finished_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  webhook: Type.Optional(ListedWebhook),
  workspace: Type.Optional(RunWorkspace),
  model: Type.Optional(Type.String({
    description: 'The model it asked its CLI for (its own, or its tool’s `<AGENT>_MODEL`); the one used: its result’s.'
  })),
  limits: Type.Optional(Type.Object(RunLimits.properties, {
    additionalProperties: false,
    description: 'The limits it is held to: its own, its tool’s ceilings, what its token’s daily ceiling left it.'
  })),
  context_id: Type.Optional(Type.String({
    description: 'A2A tasks that continue a conversation: its context (the id of its first task; docs/a2a.md).'
  })),
  queue_position: Type.Optional(Type.Integer({
    minimum: 1,
    description: 'While queued: its place among the runs of its tool waiting on this replica, 1 being next.'
  })),
  error: Type.Optional(RunError)
}

export const RunSummary = Type.Object(
  runStateProperties,
  { $id: 'RunSummary', title: 'RunSummary', description: 'A run without its result.' }
)
export type RunSummary = Static<typeof RunSummary>

export const RunState = Type.Object(
  {
    ...runStateProperties,
    result: Type.Union(
      [ref(RunResult), Type.Null()],
      { description: 'Once finished: the same result as the synchronous route.' }
    )
  },
  { $id: 'RunState', title: 'RunState', description: 'An asynchronous run and, once finished, its result.' }
)
export type RunState = Static<typeof RunState>

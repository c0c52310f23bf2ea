import { Type, type Static } from '@sinclair/typebox'
import { ErrorResponse } from './error.js'
import { ref } from './ref.js'
import { RunResult } from './run.js'
import { Step } from './steps.js'

/** The events of a live run, one per NDJSON line or SSE frame. The `result` event carries a RunResult. */
export const RunEvent = Type.Union(
  [
    Type.Object(
      {
        type: Type.Literal('output'),
        id: Type.Optional(
          Type.Integer({
            description:
              'Async runs: where this event’s bytes end in the output (offset + their length), for Last-Event-ID: ' +
              'a follower resuming from it is told exactly how many bytes it missed.'
          })
        ),
        offset: Type.Integer({ description: 'Bytes the agent wrote before this chunk.' }),
        data: Type.String({ description: 'The chunk as text (stdout and stderr merged); never splits a character.' })
      },
      { title: 'OutputEvent' }
    ),
    Type.Object(
      {
        type: Type.Literal('gap'),
        id: Type.Optional(Type.Integer()),
        omitted_bytes: Type.Integer({
          description:
            'Output this follower will never get: no longer kept (beyond the per-run output limit), counted from ' +
            'what it had received.'
        })
      },
      { title: 'GapEvent' }
    ),
    Type.Object(
      {
        type: Type.Literal('step'),
        id: Type.Optional(
          Type.String({
            pattern: '^[0-9]+\\.[0-9]+$',
            description:
              'Async runs: the output bytes before this step, a dot, and its rank among the steps read there, for ' +
              'Last-Event-ID.'
          })
        ),
        step: ref(Step)
      },
      {
        title: 'StepEvent',
        description: 'What the agent is doing, read from its structured output (claude, codex, gemini, opencode).'
      }
    ),
    Type.Object(
      {
        type: Type.Literal('queued'),
        position: Type.Integer({
          minimum: 1, description: 'Its place among the runs of its tool waiting, 1 being next.'
        })
      },
      {
        title: 'QueuedEvent',
        description:
          'The run waits for a slot (`queue_timeout`): sent as it starts waiting and whenever its place changes.'
      }
    ),
    Type.Object(
      { type: Type.Literal('heartbeat') },
      { title: 'HeartbeatEvent', description: 'Sent while the agent is quiet.' }
    ),
    Type.Object(
      {
        type: Type.Literal('result'),
        id: Type.Optional(Type.Integer({ description: 'Async runs: one past the last output byte.' })),
        result: ref(RunResult)
      },
      { title: 'ResultEvent', description: 'The last event: the same object the synchronous route answers.' }
    ),
    Type.Object(
      { type: Type.Literal('error'), error: ref(ErrorResponse) },
      {
        title: 'ErrorEvent',
        description:
          'The last event of a stream that opened while its run was queued and that ended before its agent started ' +
          '(`QUEUE_TIMED_OUT`, `SHUTTING_DOWN`…): the error a request refused before its stream opened gets.'
      }
    )
  ],
  { $id: 'RunEvent', title: 'RunEvent', description: 'One event of a streamed run.' }
)
export type RunEvent = Static<typeof RunEvent>

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { Type } from '@sinclair/typebox'
import { serviceError } from '../../errors.js'
import type { ToolName } from '../../agents/catalog.js'
import type { RunRegistry } from '../../runs/registry.js'
import { EVENT_ID_PATTERN, parseEventId } from '../../runs/event-log.js'
import { EventsChoice } from '../../schemas/run.js'
import { RunState, RunSummary, type RunRequest } from '../../schemas/runs.js'
import { ref } from '../../schemas/ref.js'
import { WebhookDeliveryState } from '../../schemas/webhooks.js'
import { errorResponses, STREAM_ITEMS } from '../../schemas/shared.js'
import { EventWriter } from '../event-writer.js'

interface RunRoutesOptions {
  runs: RunRegistry
  toolNames: readonly string[]
  heartbeatMs: number
}

/** A refused POST /runs counts under the tool it asked for ('unknown' when the body did not name one of them). */
function toolAskedFor(toolNames: readonly string[]) {
  return (request: FastifyRequest): string => {
    const tool = (request.body as { tool?: unknown } | undefined)?.tool
    return typeof tool === 'string' && toolNames.includes(tool) ? tool : 'unknown'
  }
}

const RunId = Type.Object({ id: Type.String({ description: 'The id POST /runs answered with.' }) })

const runRoutes: FastifyPluginAsyncTypebox<RunRoutesOptions> = async (app, { runs, toolNames, heartbeatMs }) => {
  const found = <T>(id: string, value: T | undefined): T => {
    if (value === undefined) throw serviceError('RUN_NOT_FOUND', id)
    return value
  }

  app.post(
    '/runs',
    {
      config: { toolOfRequest: toolAskedFor(toolNames) },
      schema: {
        operationId: 'createRun',
        tags: ['runs'],
        summary: 'Start a run in the background',
        description:
          'Validates and reserves a slot exactly as the tool routes do (same 400, 429 and 503), starts the agent, ' +
          'and answers 202 at once with the run’s id and a Location to poll. The run then belongs to no connection: ' +
          'it ends on its own, at its timeout, by DELETE, or when the service shuts down.',
        body: Type.Unsafe<RunRequest<ToolName>>(Type.Ref('RunRequest')),
        response: {
          202: ref(RunState, { description: 'The run started; poll its Location or follow /runs/{id}/events.' }),
          ...errorResponses([400, 401, 403, 404, 409, 413, 415, 429, 500, 503])
        }
      }
    },
    async (request, reply) => {
      const { tool, ...params } = request.body
      const launched = runs.launch({ kind: 'async', tool, params, caller: request.caller, log: request.log })
      const run = await launched.accepted()
      return reply.code(202).header('location', `/runs/${run.id}`).send(run)
    }
  )

  app.get(
    '/runs',
    {
      schema: {
        operationId: 'listRuns',
        tags: ['runs'],
        summary: 'Recent runs, newest first',
        description:
          'The caller’s own runs (those started with the same token) on this replica: async runs, running or ' +
          'finished and still retained (RUNS_RETENTION_MS, RUNS_MAX_FINISHED), and synchronous or streamed runs ' +
          'while they run.',
        response: {
          200: Type.Object({ runs: Type.Array(ref(RunSummary)) }, { description: 'The runs.' }),
          ...errorResponses([401, 403])
        }
      }
    },
    async (request) => ({ runs: await runs.list(request.caller) })
  )

  app.get(
    '/runs/:id',
    {
      schema: {
        operationId: 'getRun',
        tags: ['runs'],
        summary: 'A run’s status and, once finished, its result',
        description:
          'Poll until status is no longer `running`; the result is then the same object the synchronous route answers.',
        params: RunId,
        response: { 200: ref(RunState, { description: 'The run.' }), ...errorResponses([401, 403, 404]) }
      }
    },
    async (request) => found(request.params.id, await runs.state(request.params.id, request.caller))
  )

  app.get(
    '/runs/:id/events',
    {
      schema: {
        operationId: 'followRun',
        tags: ['runs'],
        summary: 'Follow a run: its steps and output from the beginning, then its result',
        description:
          'Server-sent events: every kept step and output event (each with an `id`), heartbeats while the agent is ' +
          'quiet, then the result, then the stream closes. With `Last-Event-ID`, only the events after that one. ' +
          'Closing the stream does not stop the run.',
        params: RunId,
        querystring: Type.Object({
          events: Type.Optional(
            Type.Union(EventsChoice.anyOf, { description: `${EventsChoice.description!} Default: both.` })
          )
        }),
        headers: Type.Object({
          'last-event-id': Type.Optional(
            Type.String({
              pattern: EVENT_ID_PATTERN,
              description: 'The id of the last event received: an output’s (`1234`) or a step’s (`1234.2`).'
            })
          )
        }),
        response: {
          200: {
            description:
              'The event stream: one SSE frame per RunEvent, `event: <type>`, `id:` and `data: <the RunEvent as ' +
              'JSON>`. Its schema is its items’.',
            content: {
              'text/event-stream': STREAM_ITEMS
            }
          },
          ...errorResponses([400, 401, 403, 404])
        }
      }
    },
    async (request, reply) => {
      // A synchronous or streamed run's output belongs to its own response: there is nothing to follow here.
      const feed = found(request.params.id, await runs.feed(request.params.id, request.caller))
      reply.hijack()
      const writer = new EventWriter(reply.raw, 'sse', heartbeatMs)
      writer.open(reply.getHeaders())
      const gone = new AbortController()
      reply.raw.once('close', () => gone.abort())
      // The feed is pulled only as fast as this follower takes it: one that falls behind skips to what the run still
      // keeps (a gap event says how much it missed), so a slow reader never makes the service hold more.
      const lastId = parseEventId(request.headers['last-event-id'] ?? '0')!
      for await (const frames of feed(lastId, request.query.events ?? 'both', gone.signal)) {
        writer.sendFrames(frames)
        if (!writer.closed && reply.raw.writableNeedDrain) await writer.drained()
      }
      writer.close()
      return reply
    }
  )

  app.get(
    '/runs/:id/deliveries',
    {
      schema: {
        operationId: 'listRunDeliveries',
        tags: ['runs'],
        summary: 'A run’s webhook deliveries and their attempts',
        description:
          'Each event of the run’s `webhook`, oldest first, with every attempt made (when, the receiver’s status or ' +
          'the error, how long it took) and the next one planned. Empty for a run without a webhook.',
        params: RunId,
        response: {
          200: Type.Object(
            { deliveries: Type.Array(ref(WebhookDeliveryState)) },
            { description: 'The deliveries.' }
          ),
          ...errorResponses([401, 403, 404])
        }
      }
    },
    async (request) => ({
      deliveries: found(request.params.id, await runs.deliveries(request.params.id, request.caller))
    })
  )

  app.get(
    '/runs/:id/diff',
    {
      schema: {
        operationId: 'getRunDiff',
        tags: ['runs'],
        summary: 'A worktree run’s whole diff',
        description:
          'The unified diff of everything the run’s agent changed against its `base` (`git diff --binary`), whatever ' +
          'its size: the result’s `changes.diff` holds its first WORKSPACE_DIFF_LIMIT_BYTES. Kept RUNS_RETENTION_MS ' +
          'after the run, on the replica that ran it; only the run’s caller reads it.',
        params: RunId,
        response: {
          200: {
            description: 'The diff.',
            content: { 'text/x-diff': { schema: { type: 'string' } } }
          },
          ...errorResponses([401, 403, 404])
        }
      }
    },
    async (request, reply) => {
      const diff = await runs.diff(request.params.id, request.caller)
      if (diff === undefined) throw serviceError('DIFF_NOT_FOUND', request.params.id)
      return reply.type('text/x-diff; charset=utf-8').header('content-length', diff.size).send(diff.stream)
    }
  )

  app.delete(
    '/runs/:id',
    {
      schema: {
        operationId: 'cancelRun',
        tags: ['runs'],
        summary: 'Stop a run and answer with its final state',
        description:
          'Stops the agent and its whole process tree (SIGINT, then SIGTERM and SIGKILL after the grace periods) and ' +
          'answers once it has ended. A finished run is answered as it is.',
        params: RunId,
        response: { 200: ref(RunState, { description: 'The run, ended.' }), ...errorResponses([401, 403, 404]) }
      }
    },
    async (request) => found(request.params.id, await runs.cancel(request.params.id, request.caller))
  )
}

export default runRoutes

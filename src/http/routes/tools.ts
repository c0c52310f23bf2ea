import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { FastifyReply } from 'fastify'
import type { ToolName } from '../../agents/catalog.js'
import type { AgentTool } from '../../agents/tools.js'
import type { LaunchRequest, RunRegistry } from '../../runs/registry.js'
import { RunParams } from '../../schemas/run.js'
import { ref } from '../../schemas/ref.js'
import { errorResponses, runResponse } from '../../schemas/shared.js'
import type { SlotLimiter } from '../../slots/limiter.js'
import type { ServiceError } from '../../errors.js'
import { toErrorResponse } from '../error-handler.js'
import { EventWriter } from '../event-writer.js'
import { negotiateStream } from '../stream-format.js'
import { OutputEvents } from '../../runs/output-events.js'
import type { RunEvent } from '../../schemas/events.js'
import { stopWhenClientLeaves } from './client-gone.js'

interface ToolRoutesOptions {
  heartbeatMs: number
  tools: Record<ToolName, AgentTool>
  slots: SlotLimiter
  /** How many runs of a tool wait for a slot, across the fleet where slots are shared. */
  queuedRuns: (tool: string) => Promise<number>
  runs: RunRegistry
}

const ToolStatus = Type.Object({
  name: Type.String(),
  agent: Type.String(),
  limit: Type.Integer(),
  in_use: Type.Integer(),
  free: Type.Integer(),
  queued: Type.Integer({
    description: 'Runs waiting for a slot of this tool (`queue_timeout`): with SLOTS_BACKEND=redis, on every replica.'
  })
})

const toolRoutes: FastifyPluginAsyncTypebox<ToolRoutesOptions> = async (app, options) => {
  const { heartbeatMs, tools, slots, queuedRuns, runs } = options
  app.get(
    '/tools',
    {
      schema: {
        operationId: 'listTools',
        tags: ['tools'],
        summary: 'Each tool with its limit and its slots in use and free',
        description: 'What a caller checks before running: a tool with no free slot would answer 429.',
        response: {
          200: Type.Object({ tools: Type.Array(ToolStatus) }, { description: 'The tools and their slots.' }),
          ...errorResponses([401, 403, 503])
        }
      }
    },
    async () => ({
      tools: await Promise.all(
        Object.values(tools).map(async ({ name, spec }) => {
          const limit = slots.limit(name)
          // With a shared backend: the whole fleet's count, which is what decides the next 429.
          const [inUse, queued] = await Promise.all([slots.usage(name), queuedRuns(name)])
          return { name, agent: spec.agent, limit, in_use: inUse, free: Math.max(0, limit - inUse), queued }
        })
      )
    })
  )

  for (const [name, tool] of Object.entries(tools)) {
    app.post(
      `/tools/${name}`,
      {
        config: { toolOfRequest: () => name },
        schema: {
          // crush_run → crushRun: the method name OpenAPI client generators derive from it.
          operationId: name.replace(/_(\w)/g, (_match, letter: string) => letter.toUpperCase()),
          summary: tool.spec.summary,
          description: tool.spec.description,
          tags: ['tools'],
          body: ref(RunParams),
          response: {
            200: runResponse('The run started and ended, whatever its end: `ok` says whether it went well.'),
            // Only an agent that continues sessions answers for one (404 unknown, 409 busy).
            ...errorResponses([400, 401, 403, ...(tool.resumes ? [404, 409] as const : []), 413, 415, 429, 500, 503])
          }
        }
      },
      async (request, reply) => {
        const format = negotiateStream(request.headers.accept)
        const launch = { tool: tool.name, params: request.body, caller: request.caller, log: request.log }
        if (format !== null) {
          await streamed(runs, launch, reply, new EventWriter(reply.raw, format, heartbeatMs))
          // Fastify's word for "answered already" (never awaited: a thenable that would wait for the socket).
          return reply
        }
        // Listed in GET /runs once its agent runs, and DELETE stops it like an async run.
        const { run, result } = runs.launch({ ...launch, kind: 'sync' })
        const stopWatching = stopWhenClientLeaves(reply, run)
        try {
          const answer = await result
          // Its webhook events name it by this id, as does GET /runs while it runs.
          void reply.header('x-run-id', run.id)
          return answer
        } finally {
          stopWatching()
        }
      }
    )
  }
}

/**
 * A run whose output is streamed as it comes. The stream opens once the agent runs, or once the run waits for a slot
 * (then it says its place as it changes): every refusal before is the same JSON error as without a stream, one after
 * (its wait over, shutdown) the stream's last event. A client that reads slowly holds the agent back (the sink).
 */
async function streamed(
  runs: RunRegistry,
  launch: Omit<LaunchRequest, 'kind' | 'sink'>,
  reply: FastifyReply,
  writer: EventWriter
): Promise<void> {
  const events = new OutputEvents()
  const choice = launch.params.events ?? 'both'
  // No id: a synchronous stream cannot be resumed, so it offers nothing to resume from.
  const sendOutput = ({ id: _id, ...event }: Extract<RunEvent, { type: 'output' | 'result' }>): boolean =>
    choice === 'steps' && event.type === 'output' ? !writer.behind : writer.send(event)
  const sink = {
    write: (chunk: Buffer) => {
      const event = events.next(chunk)
      return event === null || sendOutput(event)
    },
    onDrain: (resume: () => void) => writer.onDrain(resume)
  }
  const { run, result: ended } = runs.launch({ ...launch, kind: 'stream', sink })
  const stopWatching = stopWhenClientLeaves(reply, run)
  const stream = { open: false }
  const openStream = (): void => {
    if (stream.open) return
    stream.open = true
    reply.hijack()
    void reply.header('x-run-id', run.id)
    writer.open(reply.getHeaders())
  }
  // Its agent runs, here or on the fleet's worker that took it.
  run.on('phase', () => { if (run.phase === 'running') openStream() })
  run.on('queued', (position) => {
    openStream()
    writer.send({ type: 'queued', position })
  })
  if (choice !== 'output') run.on('step', (step) => writer.send({ type: 'step', step }))
  try {
    const result = await ended
    for (const event of events.closing(result)) sendOutput(event)
    writer.close()
  } catch (error) {
    if (!stream.open) throw error
    writer.send({ type: 'error', error: toErrorResponse(error as ServiceError) })
    writer.close()
  } finally {
    stopWatching()
  }
}

export default toolRoutes

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { ActiveRuns } from '../active-runs.js'
import { TOOL_NAMES, type AgentTool } from '../agents/definitions.js'
import { runTool } from '../agents/run-tool.js'
import { runsInWsl } from '../agents/command.js'
import { assertHostDirectory } from '../agents/workspace.js'
import type { Config } from '../config.js'
import { AgentLimitReached, toErrorResponse } from '../errors.js'
import type { Metrics } from '../metrics.js'
import { RunParams, RunResult } from '../schemas/run.js'
import { errorResponses, ref } from '../schemas/shared.js'
import type { SlotLimiter } from '../slots/limiter.js'
import type { SudoProbe } from '../sudo/probe.js'

export interface ToolRoutesOptions {
  config: Config
  tools: Record<string, AgentTool>
  slots: SlotLimiter
  activeRuns: ActiveRuns
  agentEnv: NodeJS.ProcessEnv
  sudoProbe: SudoProbe
  metrics: Metrics
}

const ToolStatus = Type.Object({
  name: Type.String(),
  agent: Type.String(),
  limit: Type.Integer(),
  in_use: Type.Integer(),
  free: Type.Integer()
})

const RUN_ROUTE = /^\/tools\/([a-z]+_run)$/

const toolRoutes: FastifyPluginAsyncTypebox<ToolRoutesOptions> = async (app, { config, tools, slots, activeRuns, agentEnv, sudoProbe, metrics }) => {
  // Every answer of a run route that did not run an agent, whatever refused it (auth, parser, schema, slots, spawn).
  app.addHook('onError', async (request, _reply, error) => {
    const tool = RUN_ROUTE.exec(request.routeOptions.url ?? '')?.[1]
    if (tool !== undefined) metrics.observeRejection(tool, toErrorResponse(error).code)
  })

  app.get(
    '/tools',
    {
      schema: {
        operationId: 'listTools',
        tags: ['tools'],
        summary: 'Each tool with its limit and its slots in use and free',
        description: 'What a caller checks before running: a tool with no free slot would answer 429.',
        response: { 200: Type.Object({ tools: Type.Array(ToolStatus) }, { description: 'The tools and their slots.' }), ...errorResponses([401]) }
      }
    },
    async () => ({
      tools: TOOL_NAMES.map((name) => {
        const limit = slots.limit(name)
        const inUse = slots.inUse(name)
        return { name, agent: tools[name]!.agent, limit, in_use: inUse, free: Math.max(0, limit - inUse) }
      })
    })
  )

  for (const name of TOOL_NAMES) {
    const tool = tools[name]!
    app.post(
      `/tools/${name}`,
      {
        schema: {
          // crush_run → crushRun: the method name OpenAPI client generators derive from it.
          operationId: name.replace(/_(\w)/g, (_match, letter: string) => letter.toUpperCase()),
          summary: tool.summary,
          description: tool.description,
          tags: ['tools'],
          body: ref(RunParams),
          response: {
            200: ref(RunResult, { description: 'The run started and ended, whatever its end: `ok` says whether it went well.' }),
            ...errorResponses([400, 401, 413, 415, 429, 500, 503])
          }
        }
      },
      async (request, reply) => {
        const params = request.body
        if (params.cwd !== undefined && !runsInWsl(params, config.hostPlatform)) await assertHostDirectory(params.cwd)
        const lease = await slots.acquire(name)
        if (lease === null) throw new AgentLimitReached(slots.limit(name))
        const run = activeRuns.begin(reply)
        try {
          const result = await runTool(tool, params, { config, env: agentEnv, sudoProbe, signal: run.signal, log: request.log })
          metrics.observeRun(result)
          return result
        } finally {
          run.end()
          lease.release()
        }
      }
    )
  }
}

export default toolRoutes

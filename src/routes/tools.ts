import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { ActiveRuns } from '../active-runs.js'
import { TOOL_NAMES, type AgentTool } from '../agents/definitions.js'
import { runTool } from '../agents/run-tool.js'
import { runsInWsl } from '../agents/command.js'
import { assertHostDirectory } from '../agents/workspace.js'
import type { Config } from '../config.js'
import { AgentLimitReached } from '../errors.js'
import { ErrorResponse } from '../schemas/error.js'
import { RunParams, RunResult } from '../schemas/run.js'
import type { SlotLimiter } from '../slots/limiter.js'
import type { SudoProbe } from '../sudo/probe.js'

export interface ToolRoutesOptions {
  config: Config
  tools: Record<string, AgentTool>
  slots: SlotLimiter
  activeRuns: ActiveRuns
  agentEnv: NodeJS.ProcessEnv
  sudoProbe: SudoProbe
}

const ToolStatus = Type.Object({
  name: Type.String(),
  agent: Type.String(),
  limit: Type.Integer(),
  in_use: Type.Integer(),
  free: Type.Integer()
})

const toolRoutes: FastifyPluginAsyncTypebox<ToolRoutesOptions> = async (app, { config, tools, slots, activeRuns, agentEnv, sudoProbe }) => {
  app.get(
    '/tools',
    { schema: { summary: 'Each tool with its limit and its slots in use and free', response: { 200: Type.Object({ tools: Type.Array(ToolStatus) }) } } },
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
          summary: tool.summary,
          body: RunParams,
          response: {
            200: RunResult,
            400: ErrorResponse,
            429: ErrorResponse,
            503: ErrorResponse
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
          return await runTool(tool, params, { config, env: agentEnv, sudoProbe, signal: run.signal, log: request.log })
        } finally {
          run.end()
          lease.release()
        }
      }
    )
  }
}

export default toolRoutes

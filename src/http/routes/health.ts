import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { createHash, timingSafeEqual } from 'node:crypto'
import type { ApiToken } from '../../config.js'
import type { FleetMember, ContainmentMode, AgentReadiness } from '../../schemas/health.js'
import type { Metrics } from '../../metrics.js'
import { Readiness } from '../../schemas/health.js'
import type { SlotLimiter } from '../../slots/limiter.js'

interface HealthRoutesOptions {
  /** With tokens configured, /readyz tells its details (paths, versions, Redis errors) only to a caller holding one. */
  tokens: ApiToken[]
  slots: SlotLimiter
  readiness: () => Promise<AgentReadiness[]>
  metrics: Metrics
  containment: { mode: ContainmentMode; reason: string; escapes: string; limits: string }
  isolation: { agents_can_reach: string[] }
  /** ROLE=api: the fleet's roll, whose workers take its runs. */
  fleet?: { members: () => Promise<FleetMember[]> }
}

/** Whether the request carries one of the tokens, compared in constant time (digests of equal length). */
function holdsToken(authorization: string | undefined, tokens: ApiToken[]): boolean {
  const presented = createHash('sha256').update((authorization ?? '').replace(/^Bearer\s+/i, '')).digest()
  let found = false
  for (const token of tokens) {
    found = timingSafeEqual(presented, createHash('sha256').update(token.secret).digest()) || found
  }
  return found
}

/** The fleet's roll as /readyz tells it: the members, or why they could not be read. */
async function fleetRoll(
  fleet: HealthRoutesOptions['fleet']
): Promise<{ members: FleetMember[]; error?: string } | undefined> {
  if (fleet === undefined) return undefined
  try {
    return { members: await fleet.members() }
  } catch (error) {
    return { members: [], error: (error as Error).message }
  }
}

const healthRoutes: FastifyPluginAsyncTypebox<HealthRoutesOptions> = async (
  app,
  { tokens, readiness, metrics, slots, containment, isolation, fleet }
) => {
  app.get('/healthz', {
    schema: {
      operationId: 'healthz',
      tags: ['health'],
      security: [],
      summary: 'The process is alive',
      description: 'Answers as long as the process serves requests; it checks nothing else.',
      response: { 200: Type.Object({ status: Type.Literal('ok') }, { description: 'Alive.' }) }
    }
  }, async () => ({
    status: 'ok' as const
  }))

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'readyz',
        tags: ['health'],
        security: [],
        summary: 'Each agent binary found, with its version',
        description:
          'Ready when at least one agent can run (found, and no `problem` as configured; ROLE=api: a worker on the ' +
          'roll takes at least one tool) and the slots can be counted; 503 otherwise, or when Redis ' +
          '(SLOTS_BACKEND=redis) does not answer.',
        response: {
          200: { ...Readiness, description: 'At least one agent is usable.' },
          503: { ...Readiness, description: 'No agent binary was found, or the slots backend does not answer.' }
        }
      }
    },
    async (request, reply) => {
      const [agents, slotsHealth, roll] = await Promise.all([readiness(), slots.health(), fleetRoll(fleet)])
      // An API replica hands every run to the workers: what it can serve is what a worker on the roll takes.
      const runnable = roll === undefined
        ? agents.some((agent) => agent.path !== null && agent.problem === null)
        : roll.members.some((member) => member.role === 'worker' && Object.keys(member.agents).length > 0)
      const usable = runnable && slotsHealth.ok
      const status = usable ? 'ready' : 'unavailable'
      const code = usable ? 200 : 503
      // Paths, versions and Redis errors help an operator and an attacker alike: with tokens, only for a token holder.
      if (tokens.length > 0 && !holdsToken(request.headers.authorization, tokens)) {
        return reply.code(code).send({ status })
      }
      return reply.code(code).send({
        status, agents, slots: slotsHealth, containment, ...(roll === undefined ? {} : { fleet: roll }), isolation
      })
    }
  )

  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'metrics',
        tags: ['health'],
        security: [],
        summary: 'Prometheus metrics',
        description:
          'Runs by tool and outcome, run durations, slots in use, rejections by tool and error code, and the ' +
          'process metrics, in the Prometheus text format. Open like the health routes: put it behind the network, ' +
          'not a token.',
        response: {
          200: {
            description: 'The metrics in the Prometheus text format.',
            content: { 'text/plain': { schema: Type.String() } }
          }
        }
      }
    },
    async (_request, reply) => {
      const text = await metrics.registry.metrics()
      return reply.type(metrics.registry.contentType).send(text)
    }
  )
}

export default healthRoutes

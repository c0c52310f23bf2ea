import { Type, type Static } from '@sinclair/typebox'

/** How a run's processes are held together (src/process/): one name per containment the service can start in. */
export const ContainmentMode = Type.Union([
  Type.Literal('pid-namespace'),
  Type.Literal('process-group'),
  Type.Literal('wsl-process-group'),
  Type.Literal('windows-tree')
])
export type ContainmentMode = Static<typeof ContainmentMode>

export const SlotsHealth = Type.Object(
  {
    backend: Type.Union([Type.Literal('memory'), Type.Literal('redis')]),
    ok: Type.Boolean(),
    error: Type.Optional(Type.String())
  },
  { description: 'Where the agent slots are counted; with Redis, whether it answers.' }
)
export type SlotsHealth = Static<typeof SlotsHealth>

export const AgentReadiness = Type.Object({
  tool: Type.String(),
  bin: Type.String(),
  path: Type.Union([Type.String(), Type.Null()], { description: 'Where the binary was found on the agents’ PATH.' }),
  version: Type.Union([Type.String(), Type.Null()]),
  problem: Type.Union(
    [Type.String(), Type.Null()],
    { description: 'Why every run of this agent would fail as configured, and what to change.' }
  )
})

export const FleetMember = Type.Object({
  id: Type.String({ description: 'The replica’s id.' }),
  host: Type.String(),
  role: Type.Union([Type.Literal('api'), Type.Literal('worker')]),
  agents: Type.Record(Type.String(), Type.Integer(), {
    description: 'A worker’s tools, each with how many of its runs it takes at once (WORKER_MAX_<AGENT>_AGENTS).'
  }),
  places: Type.Optional(Type.Array(Type.Union([Type.Literal('host'), Type.Literal('wsl')]), {
    description: 'Where a worker runs them: on its host, and inside WSL (runs with wsl_distro) for a Windows worker ' +
      '(AGENT_HOST_PLATFORM=win32), the only one they are offered to. Empty for an API replica.'
  })),
  started_at: Type.String({ format: 'date-time' }),
  last_seen: Type.String({ format: 'date-time', description: 'Its last renewal on the roll (every SLOTS_TTL_MS / 3).' })
})

const FleetRoll = Type.Object({
  members: Type.Array(FleetMember, { description: 'Members seen within SLOTS_TTL_MS, longest in the fleet first.' }),
  error: Type.Optional(Type.String({ description: 'Why the roll could not be read (Redis).' }))
}, { description: 'ROLE=api: the fleet’s API replicas and workers, as the roll in Redis lists them.' })
export type FleetMember = Static<typeof FleetMember>

const ReadinessStatus = Type.Union([Type.Literal('ready'), Type.Literal('unavailable')])

const ReadinessDetails = Type.Object({
  status: ReadinessStatus,
  agents: Type.Array(AgentReadiness),
  slots: SlotsHealth,
  containment: Type.Object(
    {
      mode: ContainmentMode,
      reason: Type.String(),
      escapes: Type.String({ description: 'What, in this mode, can outlive its run.' }),
      limits: Type.String({
        description: 'What bounds each run (a cgroup of its own: processes, memory, a CPU share), or why nothing does.'
      })
    },
    { description: 'How agents on this host are contained (WSL runs: wsl-process-group), and why not a stronger mode.' }
  ),
  fleet: Type.Optional(FleetRoll),
  isolation: Type.Object(
    {
      agents_can_reach: Type.Array(Type.String(), {
        description: 'What an agent can reach that is not its own in this setup (empty: nothing known to be open).'
      })
    },
    { description: 'Who agents run as decides what they can read: AGENT_USER closes most of this list.' }
  )
}, { title: 'ReadinessDetails', description: 'Without API_TOKENS, or with a valid token: everything.' })

export const Readiness = Type.Union([
  ReadinessDetails,
  Type.Object(
    { status: ReadinessStatus },
    { title: 'ReadinessStatus', additionalProperties: false, description: 'With API_TOKENS set and no valid token.' }
  )
], { description: 'With API_TOKENS set, only `status` unless the request carries a valid token.' })
export type AgentReadiness = Static<typeof AgentReadiness>

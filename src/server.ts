import closeWithGrace from 'close-with-grace'
import { buildApp } from './service/app.js'
import { loadConfig, type Config } from './config.js'
import { closeInheritedDescriptors } from './process/inherited-descriptors.js'

// Before anything else opens a descriptor: what the service was started with must not reach its agents.
const inherited = closeInheritedDescriptors()

let config: Config
try {
  config = loadConfig()
} catch (error) {
  console.error(`agent-runner: invalid configuration: ${(error as Error).message}`)
  process.exit(1)
}

let app: Awaited<ReturnType<typeof buildApp>>
try {
  app = await buildApp(config)
} catch (error) {
  // What stops a start (DATA_DIR held by another service, a native module built for another Node, Redis away) is
  // one line an operator can act on, not a stack trace.
  console.error(`agent-runner: cannot start: ${(error as Error).message}`)
  process.exit(1)
}

// Agents get the kill grace twice (SIGINT → SIGTERM → SIGKILL) to stop before their requests answer.
closeWithGrace({ delay: config.killGraceMs * 2 + 5000, logger: app.log }, async ({ signal, err }) => {
  if (err) app.log.error({ err }, 'closing after an error')
  else app.log.info({ signal }, 'closing: stopping agents and answering their requests')
  await app.close()
})

// Windows never delivers SIGTERM: Ctrl-C arrives as SIGINT, Ctrl-Break (and a service manager's stop, through
// GenerateConsoleCtrlEvent) as SIGBREAK, which close-with-grace does not listen to. Both close gracefully.
process.on('SIGBREAK', () => process.emit('SIGINT', 'SIGINT'))

if (inherited.length > 0) {
  app.log.info({ fds: inherited }, 'closed descriptors inherited at start: agents get stdio only')
}

// A worker listens to nothing: it takes the runs the fleet's API replicas hand over, from Redis.
let address: string | undefined
try {
  if (config.role === 'worker') await app.ready()
  else address = await app.listen({ host: config.host, port: config.port })
} catch (error) {
  app.log.fatal({ err: error }, 'could not listen')
  process.exit(1)
}

// What a newcomer needs to know at a glance: which agents will run, how many at once, who may call, and how contained.
const agents = await app.readiness()
app.log.info(
  {
    agents: agents.map(({ tool, path, version }) => ({ tool, path, version })),
    limits: Object.fromEntries(agents.map(({ tool }) => [tool, app.slots.limit(tool)])),
    auth: config.apiTokens.length > 0
      ? `bearer tokens: ${config.apiTokens.map((token) => token.name).join(', ')}`
      : 'none: loopback only, Host and Origin checked',
    containment: app.containment,
    role: config.role,
    ...(address === undefined ? {} : { docs: `${address}/docs` })
  },
  `agent-runner ready: ${
    agents.filter((agent) => agent.path !== null).map((agent) => agent.tool).join(', ') || 'no agent found'
  }`
)
for (const agent of agents) {
  if (agent.path === null) {
    app.log.warn({ tool: agent.tool }, `${agent.tool}: ${agent.bin} is not on the agents' PATH; its runs answer 503`)
  }
  if (agent.problem !== null) app.log.warn({ tool: agent.tool }, `${agent.tool}: ${agent.problem}`)
}

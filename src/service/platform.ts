import fp from 'fastify-plugin'
import { randomUUID } from 'node:crypto'
import { claimDataDir } from '../data-dir.js'
import type { AgentUser } from '../process/agent-user.js'
import { confined } from '../process/confined.js'
import type { Containment } from '../process/containment.js'
import { chooseHostContainment, type ContainmentSetting, type HostContainment } from '../process/host-containment.js'
import { RunLedger } from '../process/ledger.js'
import { withoutCgroups } from '../process/rlimits.js'
import { hostCgroups, removeCgroups, type RunLimits } from '../process/run-cgroups.js'
import { isEarlierLife, killMarked, serviceLife } from '../process/run-marks.js'
import { TokenUsers, type UidRange } from '../process/token-users.js'
import { prepareWorkdir } from '../process/workdir.js'
import { SudoShim } from '../sudo/shim.js'

export interface PlatformOptions {
  dataDir: string
  containment: ContainmentSetting
  runLimits: RunLimits | undefined
  /** AGENT_USERS, with the token names each gets a user for (every one, anonymous callers' included). */
  agentUsers: { range: UidRange; template: string | undefined; tokens: string[] } | undefined
  agentWorkdir: string
  agentUser: AgentUser | undefined
  wslBin: string
  /** What the service's own helpers inherit (leftover stops): the common variables only. */
  agentEnv: NodeJS.ProcessEnv
}

/** What this host gives every run, claimed and cleaned once at start. */
interface Platform {
  /** This process, among the replicas sharing a store. */
  replica: string
  dataDir: string
  host: HostContainment
  /** The host's containment, each run in its cgroup (or under its token's process limit) where the host allows. */
  containment: Containment
  /** What bounds a run, in words (the startup log, /readyz). */
  limits: string
  cgroups: boolean
  ledger: RunLedger
  /** Absent where agents never meet a host sudo (Windows). */
  sudoShim: SudoShim | undefined
  /** AGENT_USERS: each token's agents as a user of its own; absent, every token's are AGENT_USER (or the service). */
  tokenUsers: TokenUsers | undefined
}

declare module 'fastify' {
  interface FastifyInstance {
    platform: Platform
  }
}

/**
 * The host made ready for runs, before any: DATA_DIR claimed (this service's alone), what a killed life left running
 * stopped, the containment chosen and bounded, the sudo shim laid, each token's user allocated. Each resource is
 * released by the `onClose` beside it.
 */
export const platformPlugin = fp<PlatformOptions>(async (app, options) => {
  // Windows has no sudo of its own; WSL runs meet the distro's.
  const sudoShim = process.platform === 'win32' ? undefined : SudoShim.install()
  app.addHook('onClose', () => { sudoShim?.remove() })
  // Each token's home, and every worktree by default, is under DATA_DIR: agents' users cross it (never list it: every
  // file there is 0600).
  const crossed = options.agentUsers !== undefined || options.agentUser !== undefined
  const dataDir = await claimDataDir(options.dataDir, crossed)
  app.addHook('onClose', () => { dataDir.release() })
  if (dataDir.repaired !== null) app.log.warn(dataDir.repaired)
  const replica = randomUUID()
  const life = serviceLife(dataDir.dir, replica)
  const host = await chooseHostContainment(options.containment, undefined, life)
  app.log.info({ containment: host.containment.mode, reason: host.reason }, `containment: ${host.containment.mode}`)
  const ledger = new RunLedger(options.dataDir)
  // Agents' default directory: theirs alone, not the service's (its .env, its data).
  prepareWorkdir(options.agentWorkdir, options.agentUser)
  const leftovers = await ledger.stopLeftovers({ env: options.agentEnv, life, wslBin: options.wslBin })
  if (leftovers.length > 0) {
    app.log.warn({ leftovers }, `stopped what ${leftovers.length} run(s) of a previous life left running`)
  }
  // What escaped the ledger (a process that left its run's group) still carries its run's mark.
  const marked = await killMarked(isEarlierLife(life))
  if (marked > 0) app.log.warn({ processes: marked }, `stopped ${marked} process(es) a previous life's runs left`)
  const bounded = await boundedRuns(host.containment, life.service, options)
  app.log.info(`limits: ${bounded.limits}`)
  if (bounded.leftovers > 0) {
    app.log.warn(`stopped ${String(bounded.leftovers)} process(es) a previous life's runs left in their cgroups`)
  }
  if (bounded.layout !== undefined) {
    const { layout } = bounded
    app.addHook('onClose', () => { removeCgroups(layout) })
  }
  app.decorate('platform', {
    replica,
    dataDir: dataDir.dir,
    host,
    containment: bounded.containment,
    limits: bounded.limits,
    cgroups: bounded.layout !== undefined,
    ledger,
    sudoShim,
    tokenUsers: tokenUsers(options.agentUsers, dataDir.dir)
  })
}, { name: 'platform' })

/**
 * Each run in a cgroup of its own where the host gives one (what a killed life left in them, beyond what its ledger
 * and marks found, ended now); else each token's uid under its process limit, where it has one.
 */
async function boundedRuns(host: Containment, service: string, options: PlatformOptions) {
  const cgroups = await hostCgroups(service, options.runLimits)
  if ('layout' in cgroups) {
    const { layout, leftovers, limits } = cgroups
    return { containment: confined(host, layout, options.runLimits!), limits, layout, leftovers }
  }
  const { containment, limits } = await withoutCgroups(host, {
    processes: options.runLimits?.processes,
    tokenUsers: options.agentUsers !== undefined,
    path: process.env['PATH'] ?? '',
    noCgroups: cgroups.reason
  })
  return { containment, limits, layout: undefined, leftovers: 0 }
}

/** AGENT_USERS: every token's user allocated at start (a range too small stops it here), anonymous callers' too. */
function tokenUsers(agentUsers: PlatformOptions['agentUsers'], dataDir: string): TokenUsers | undefined {
  if (agentUsers === undefined) return undefined
  const { tokens, ...settings } = agentUsers
  const users = new TokenUsers({ ...settings, dataDir })
  users.allocate(tokens)
  return users
}

import { LRUCache } from 'lru-cache'
import type { AgentTool } from './tools.js'
import { versionOf, type ProbeOwner } from './locate.js'
import { findOnPath } from '../process/find-executable.js'
import { searchPath } from '../process/search-path.js'
import type { AgentReadiness } from '../schemas/health.js'

/** Versions change only when someone upgrades a CLI; asking each probe would spawn on every readiness check. */
const VERSION_TTL_MS = 10 * 60 * 1000

/**
 * Each agent as the service would find it: where its binary is, its version, and what would stop every run. The
 * version probes end with their owner (see ProbeOwner).
 */
export function agentReadiness(tools: AgentTool[], owner: ProbeOwner): () => Promise<AgentReadiness[]> {
  const versions = new LRUCache<string, string, { env: NodeJS.ProcessEnv }>({
    max: 64,
    ttl: VERSION_TTL_MS,
    // A binary that does not answer --version is cached as '' (found, version unknown) rather than asked again.
    fetchMethod: async (file, _stale, { context }) => (await versionOf(file, context.env, owner)) ?? ''
  })
  return () =>
    Promise.all(
      tools.map(async (tool) => {
        const path = (await findOnPath(tool.settings.bin, searchPath(tool.env))) ?? null
        const version = path === null ? null : (await versions.fetch(path, { context: { env: tool.env } })) || null
        return { tool: tool.name, bin: tool.settings.bin, path, version, problem: tool.problem(tool.env) }
      })
    )
}

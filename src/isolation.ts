import type { Config } from './config.js'
import type { ContainmentMode } from './schemas/health.js'

/**
 * What an agent (a program running whatever a model decides) can reach that is not its own, in this setup: said at
 * start and in /readyz, so that an operator learns it before an agent does. Empty when nothing is known to be open.
 */
export function whatAgentsCanReach(
  config: Pick<
    Config,
    'agentUser' | 'agentUsers' | 'apiTokens' | 'slots' | 'runsStore' | 'dataDir' | 'secretFiles' | 'exposedSecretFiles'
  >,
  mode: ContainmentMode
): string[] {
  const reach: string[] = []
  const sharesUid = config.agentUser === undefined && config.agentUsers === undefined
  const redis = config.slots.backend === 'redis' || config.runsStore === 'redis'
  if (config.apiTokens.length === 0) {
    reach.push('the service itself: without API_TOKENS any local process, agents included, may call it')
  }
  if (sharesUid) {
    // A PID namespace mounts its own /proc: the service's environment is out of sight there, its files are not.
    const environ = mode === 'pid-namespace' ? [] : ['the service\'s environment (/proc/<pid>/environ)']
    if (config.apiTokens.length > 0 || redis) {
      reach.push(`the service's secrets: ${[...environ, ...config.secretFiles, 'its .env, if any'].join(', ')}`)
    }
    if (config.runsStore === 'sqlite') {
      reach.push(`every caller's runs in ${config.dataDir} (the same user's files)`)
    }
  }
  if (config.apiTokens.length > 1 && config.agentUsers === undefined) {
    reach.push('other tokens\' runs and conversations: every token\'s agents are one user (AGENT_USERS separates them)')
  }
  for (const exposed of config.exposedSecretFiles) reach.push(`a secret file's group: ${exposed}`)
  if (redis) {
    const advice = 'require AUTH (or an ACL user) and keep the URL out of agents\' reach'
    reach.push(`Redis, over the network, with its URL: ${advice}`)
  }
  return reach
}

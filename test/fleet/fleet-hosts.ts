import { call } from '../helpers/index.js'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { agentVariables } from '#src/agents/spec.js'

// What the fleet's tests share about its hosts: an API replica without agents, and the fleet's slots seen from one.

/** An API replica need not have the CLIs: its runs are run by workers. */
export const NO_AGENT_HERE = Object.fromEntries(
  BUILT_IN_AGENTS.map((spec) => [agentVariables(spec).bin, `no-${spec.agent}-here`])
)

/** The slots of a tool in use across the fleet, as GET /tools tells the holder of `headers`. */
export async function inUse(base: string, tool: string, headers: Record<string, string>): Promise<number> {
  const { body } = await call(base, 'GET', '/tools', { headers })
  return (body as { tools: Array<{ name: string; in_use: number }> }).tools.find((each) => each.name === tool)!.in_use
}

import type { Config } from '../config.js'
import type { ParsedReport } from './report.js'
import { buildAgentEnv, ruleForAgent } from './environment.js'
import { toolNameOf } from './spec.js'

/** A tool's name: `<agent>_run`, one per agent spec. */
export type ToolName = string

/** An agent as the service runs it: its spec bound to its settings. */
export interface AgentTool {
  name: ToolName
  agent: string
  summary: string
  /** What the tool runs, for the OpenAPI document. */
  description: string
  bin: string
  maxAgents: number
  /** What the agent inherits: the common variables and its own (its spec's), never the service's secrets. */
  env: NodeJS.ProcessEnv
  /** `live`: someone follows the output as it comes (a stream, an async run), so progress events are worth printing. */
  agentArgs(task: string, live: boolean): string[]
  /** Why the agent would not read this task as its prompt; null when it would. */
  refuseTask(task: string): string | null
  /** Turns what the agent printed into the answer a person reads, when the agent reports in a structured form. */
  parseReport(output: string): ParsedReport | null
  /** Why every run would fail as configured, with the variable to change; null when nothing stands in the way. */
  problem(env: NodeJS.ProcessEnv): string | null
}

/** Every configured agent as a tool, by tool name, in the order of the agents' list. */
export function defineTools(config: Config, serviceEnv: NodeJS.ProcessEnv): Record<ToolName, AgentTool> {
  return Object.fromEntries(
    config.agents.map(({ spec, settings }): [ToolName, AgentTool] => [
      toolNameOf(spec),
      {
        name: toolNameOf(spec),
        agent: spec.agent,
        summary: spec.summary,
        description: spec.description,
        bin: settings.bin,
        maxAgents: settings.maxAgents,
        env: buildAgentEnv(serviceEnv, ruleForAgent(config.agentEnvRule, spec.env)),
        agentArgs: (task, live) => spec.args(task, live, settings),
        refuseTask: (task) => spec.refuseTask?.(task) ?? null,
        parseReport: (output) => spec.parseReport?.(output) ?? null,
        problem: (env) => spec.problem?.(settings, env, config.agentUser?.uid ?? process.getuid?.()) ?? null
      }
    ])
  )
}

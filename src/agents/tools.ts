import { priceOf, type ModelPrices, type RunLimits } from '../schemas/limits.js'
import { buildAgentEnv, ruleForAgent, type AgentEnvRule } from './environment.js'
import { acceptedSessionId } from './session-ids.js'
import type { ToolName } from './catalog.js'
import { toolNameOf, type AgentSettings, type AgentSpec } from './spec.js'

/** The argv after the binary, and the agent's standard input: the task, or undefined when the argv carries it. */
export interface AgentInvocation {
  args: string[]
  input: string | undefined
}

const LIMIT_NAMES = ['max_turns', 'max_tokens', 'max_cost_usd'] as const
type LimitName = typeof LIMIT_NAMES[number]

/** A run's limits as the tool can hold it to them, or why it cannot. */
export type LimitsVerdict =
  | { limits: RunLimits | undefined }
  | { refused: 'above_ceiling'; limit: LimitName; ceiling: number }
  | { refused: 'not_supported' | 'cost_unknown'; limit: LimitName }

/**
 * An agent's spec bound to its settings: what the service runs under the tool's name. Everything else (its summary,
 * its variables, how it reads a task) is the spec's own.
 */
export class AgentTool {
  readonly name: ToolName
  readonly spec: AgentSpec
  readonly settings: AgentSettings
  /** What the agent inherits: the common variables and its own (its spec's), never the service's secrets. */
  readonly env: NodeJS.ProcessEnv
  /** Who the agent runs as (AGENT_USER, else the service's own uid; undefined on Windows). */
  readonly #agentUid: number | undefined
  /**
   * Its output says what it does (commands, edits, tool calls) as JSON, not only its text: steps say more than the
   * output. Asked of one parser once, not of a fresh one at each run.
   */
  readonly reportsActions: boolean

  constructor(spec: AgentSpec, settings: AgentSettings, env: NodeJS.ProcessEnv, agentUid: number | undefined) {
    // Only a test declares an agent beyond the catalog (agent-spec.test.ts): the name is then one the type lacks.
    this.name = toolNameOf(spec) as ToolName
    this.spec = spec
    this.settings = settings
    this.env = env
    this.#agentUid = agentUid
    const parser = spec.steps?.()
    this.reportsActions = parser !== undefined && parser.readsText !== true
  }

  /**
   * How one run hands `task` to its CLI: the argv after the binary, and what it reads on standard input (the task,
   * unless its spec puts it in the argv). `session`: the session this run continues, when it does; `model`: the model
   * it asks for (`modelOf`); `limits`: its limits, given to a CLI that takes them too (`limitsOf`).
   */
  invocation(task: string, session?: string, model?: string, limits?: RunLimits): AgentInvocation {
    const native = limits === undefined ? [] : (this.spec.limitArgs?.(limits) ?? [])
    const args = [...this.spec.args(this.settings, session, model), ...native]
    return this.spec.taskInArgv === undefined
      ? { args, input: task }
      : { args: [...args, ...this.spec.taskInArgv(task)], input: undefined }
  }

  /**
   * The model a run asks its CLI for: the one it names, else the operator's default (undefined: the CLI's own choice);
   * null when the operator's allow-list (<AGENT>_MODELS) lacks the one it names.
   */
  modelOf(requested: string | undefined): string | undefined | null {
    const { models, model } = this.settings
    if (requested === undefined) return model
    return models.length === 0 || models.includes(requested) ? requested : null
  }

  /**
   * A run's limits: each it names, at most the operator's ceiling for the tool, else that ceiling. Why not, when it
   * cannot be held to them: a limit above a ceiling, any limit for a CLI that reports no steps (crush), a cost limit
   * where nothing says what the run costs (the CLI does not, nor the price table for the run's model). `dollarsLeft`:
   * what its token's daily ceiling leaves it, a cost limit of its own.
   */
  limitsOf(
    requested: RunLimits | undefined, model: string | undefined, prices: ModelPrices, dollarsLeft?: number
  ): LimitsVerdict {
    const { ceilings } = this.settings
    const asked = requested ?? {}
    const above = LIMIT_NAMES.find((name) =>
      asked[name] !== undefined && ceilings[name] !== undefined && asked[name] > ceilings[name])
    if (above !== undefined) return { refused: 'above_ceiling', limit: above, ceiling: ceilings[above]! }
    const limits: RunLimits = { ...ceilings, ...asked }
    if (dollarsLeft !== undefined) limits.max_cost_usd = Math.min(limits.max_cost_usd ?? dollarsLeft, dollarsLeft)
    const named = LIMIT_NAMES.filter((name) => limits[name] !== undefined)
    if (named.length === 0) return { limits: undefined }
    if (!this.reportsActions) return { refused: 'not_supported', limit: named[0]! }
    const costKnown = this.spec.reportsCost === true || priceOf(prices, model) !== undefined
    if (limits.max_cost_usd !== undefined && !costKnown) return { refused: 'cost_unknown', limit: 'max_cost_usd' }
    return { limits }
  }

  get resumes(): boolean {
    return this.spec.resumes !== undefined
  }

  /** The id a run may leave for a later one: one in its CLI's form, the resumed session's own when it continued one. */
  sessionLeft(reported: string | null, resumed: string | undefined): string | null {
    return acceptedSessionId(reported, this.spec.resumes?.sessionId, resumed)
  }

  /** An id this CLI could have issued: any other names no session of it (`latest`, a title, an index). */
  issues(sessionId: string): boolean {
    return acceptedSessionId(sessionId, this.spec.resumes?.sessionId, undefined) !== null
  }

  problem(env: NodeJS.ProcessEnv): string | null {
    return this.spec.problem?.(this.settings, env, this.#agentUid) ?? null
  }
}

/** What the tools are made of: the configured agents, the rule for their environment, who they run as. */
export interface ToolsSettings {
  agents: ReadonlyArray<{ spec: AgentSpec; settings: AgentSettings }>
  agentEnvRule: AgentEnvRule
  /** AGENT_USER's uid, or one of AGENT_USERS', else undefined (the service's own, where it has one). */
  agentUserUid: number | undefined
}

/** Every configured agent as a tool, by tool name, in the order of the agents' list. */
export function defineTools(options: ToolsSettings, serviceEnv: NodeJS.ProcessEnv): Record<ToolName, AgentTool> {
  const agentUid = options.agentUserUid ?? process.getuid?.()
  const tools = options.agents.map(({ spec, settings }) =>
    new AgentTool(spec, settings, buildAgentEnv(serviceEnv, ruleForAgent(options.agentEnvRule, spec.env)), agentUid))
  return Object.fromEntries(tools.map((tool) => [tool.name, tool])) as Record<ToolName, AgentTool>
}

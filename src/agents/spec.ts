import type { TSchema } from '@sinclair/typebox'
import type { Step } from '../schemas/steps.js'
import type { AgentReport } from '../schemas/run.js'
import type { LimitReason, RunLimits } from '../schemas/limits.js'
import type { ToolLimits } from '../process/containment.js'

/** What a CLI's structured output said of the run's end: the answer a person reads, and the rest of its report. */
export interface ParsedReport {
  text: string
  report: AgentReport
  /** The limit the CLI stopped the run at itself, where it was given one (claude's --max-turns). */
  limit?: LimitReason
}

/**
 * One run's structured output read into steps, one JSON value (one line) at a time, as it comes; a fresh one per
 * run. The same pass reads its report: the answer is whole whatever of the output the run keeps (gemini's comes as
 * deltas across all of it).
 */
export interface StepParser {
  /** Each line of the output as text (blank ones too), for a CLI that prints no JSON; otherwise each line's JSON. */
  readsText?: boolean
  read(event: unknown): Step[]
  /** The CLI's id of the conversation, once it has said it (what resuming it would name). */
  session(): string | null
  /** What it still holds once the output has ended (text it was merging). */
  end?(): Step[]
  /** Once the output has ended: its report, or null when it printed none this parser knows (a failure to start). */
  report?(): ParsedReport | null
}

/** How an agent is configured, from the variables its spec names (CRUSH_BIN, MAX_CRUSH_AGENTS, …). */
export interface AgentSettings {
  bin: string
  maxAgents: number
  /** ROLE=worker: how many of its runs this worker takes at once (WORKER_MAX_<AGENT>_AGENTS), within `maxAgents`. */
  workerMaxAgents: number
  /** How many of its runs may wait for a slot (MAX_QUEUED_<AGENT>), on this replica. */
  maxQueued: number
  extraArgs: string[]
  /** Its runs' own limits (<AGENT>_MAX_PROCESSES, <AGENT>_MAX_MEMORY_MB), over the service's AGENT_MAX_*. */
  limits: ToolLimits
  /** Its own settings, by variable name (CLAUDE_PERMISSION_MODE…), as the config schema validated them. */
  own: Record<string, string>
  /** The models a run may ask for (<AGENT>_MODELS); empty: any. */
  models: string[]
  /** The model of a run that names none (<AGENT>_MODEL); undefined: the CLI's own choice. */
  model: string | undefined
  /** The most a run may ask for (<AGENT>_MAX_TURNS, _MAX_TOKENS, _MAX_COST_USD), and what it gets naming none. */
  ceilings: RunLimits
}

/**
 * Everything that makes one agent CLI what it is, in one file per agent: the service derives its tool
 * (`POST /tools/<agent>_run`), its variables, its slot limit, its OpenAPI operation and its metrics labels from it.
 */
export interface AgentSpec<Agent extends string = string> {
  /**
   * Lower-case name: the tool is `<agent>_run`, its variables `<AGENT>_BIN`, `MAX_<AGENT>_AGENTS`,
   * `<AGENT>_EXTRA_ARGS`.
   */
  agent: Agent
  defaultBin: string
  /** One line for the OpenAPI operation. */
  summary: string
  /** What the tool runs, for the OpenAPI document. */
  description: string
  /**
   * The variables of the service's environment this agent reads beyond the common ones (PATH, HOME, locale, proxies):
   * its providers' keys and its own settings, as patterns (`OPENAI_*`). No other agent sees them.
   */
  env: string[]
  /** Variables of its own beyond the three every agent has, with their schema (a default included). */
  ownSettings?: Record<string, TSchema>
  /**
   * The argv after the binary, the same whether the run is followed live or not: its result's steps come from the
   * same structured output. `session`, a session its CLI reported earlier (given only to a spec that `resumes`), as
   * the session to continue, never as an option. The task is not in it: it reaches the CLI on its standard input,
   * a pipe only the run holds (a command line is readable by every local user through /proc, and Windows caps its
   * length), unless the spec says `taskInArgv`. `model`, the model the run asks for (`modelOption` joins it to its
   * CLI's flag), placed where its CLI reads it.
   */
  args(settings: AgentSettings, session?: string, model?: string): string[]
  /**
   * A run's limits as its CLI's own options, where it has them: it then stops cleanly at one before the service has
   * to stop it (claude's --max-turns, --max-budget-usd). Each joined to its flag.
   */
  limitArgs?(limits: RunLimits): string[]
  /** Its steps carry the dollars its calls cost (claude, opencode): a cost limit needs no price table. */
  reportsCost?: boolean
  /**
   * For a CLI that does not read a piped task byte for byte (crush appends two newlines to it): the words that end
   * its argv with the task as its prompt, never as an option.
   */
  taskInArgv?(task: string): string[]
  /**
   * Its CLI continues an earlier session non-interactively (a run may carry `resume`), and the form of the ids it
   * issues: a reported id in no other form is never kept, nor is one resumed.
   */
  resumes?: { sessionId: RegExp }
  /**
   * Where the CLI's output is JSON lines: reads them into steps and its report. Absent: plain text, which gives no
   * steps, and whose report is the output itself.
   */
  steps?(): StepParser
  /**
   * Why every run would fail as configured, with the variable to change; null when nothing stands in the way.
   * `agentUid`: who the agent runs as (AGENT_USER, else the service's own uid; undefined on Windows).
   */
  problem?(settings: AgentSettings, env: NodeJS.ProcessEnv, agentUid: number | undefined): string | null
}

/**
 * A model as one argv element, joined to its flag: no parser reads it as an option of its own, whatever it holds (a
 * model never starts with `-` either: RunParams and the config check it).
 */
export const modelOption = (flag: `--${string}`, model: string | undefined): string[] =>
  model === undefined ? [] : [`${flag}=${model}`]

export const toolNameOf = <Agent extends string>(spec: AgentSpec<Agent>): `${Agent}_run` => `${spec.agent}_run`

/** The variables every agent has, named after it. */
export function agentVariables(spec: AgentSpec): {
  bin: string
  max: string
  workerMax: string
  maxQueued: string
  extraArgs: string
  maxProcesses: string
  maxMemory: string
  models: string
  model: string
  maxTurns: string
  maxTokens: string
  maxCostUsd: string
} {
  const upper = spec.agent.toUpperCase()
  return {
    bin: `${upper}_BIN`,
    max: `MAX_${upper}_AGENTS`,
    workerMax: `WORKER_MAX_${upper}_AGENTS`,
    maxQueued: `MAX_QUEUED_${upper}`,
    extraArgs: `${upper}_EXTRA_ARGS`,
    maxProcesses: `${upper}_MAX_PROCESSES`,
    maxMemory: `${upper}_MAX_MEMORY_MB`,
    models: `${upper}_MODELS`,
    model: `${upper}_MODEL`,
    maxTurns: `${upper}_MAX_TURNS`,
    maxTokens: `${upper}_MAX_TOKENS`,
    maxCostUsd: `${upper}_MAX_COST_USD`
  }
}

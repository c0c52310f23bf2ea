import { priceOf, type LimitReason, type ModelPrices, type RunLimits } from '../schemas/limits.js'
import type { RunUsage } from '../schemas/steps.js'

/** How a run's cost is known beside its CLI's figure: the operator's prices, and the model the run asked for. */
export interface Pricing {
  prices: ModelPrices
  /** The model asked for (or the tool's default), for usage that names none. */
  model: string | undefined
}

export const NO_PRICING: Pricing = { prices: {}, model: undefined }

/**
 * The usage with its cost: the operator's price table, when it prices the model used, wins over the CLI's own figure
 * (opencode says 0 for a model it has no price for); else the CLI's figure, which may be null.
 */
export function pricedUsage(usage: RunUsage | null, { prices, model }: Pricing): RunUsage | null {
  if (usage === null) return null
  const price = priceOf(prices, usage.model ?? model)
  if (price === undefined || (usage.input_tokens === null && usage.output_tokens === null)) return usage
  const dollars = (usage.input_tokens ?? 0) * price.input_usd_per_mtok +
    (usage.output_tokens ?? 0) * price.output_usd_per_mtok
  return { ...usage, cost_usd: dollars / 1_000_000 }
}

/**
 * The first limit the run is past: more turns than allowed (the next response has begun), more tokens, more dollars.
 * Reaching a limit exactly is within it.
 */
export function crossedLimit(limits: RunLimits, turns: number, usage: RunUsage | null): LimitReason | null {
  if (limits.max_turns !== undefined && turns > limits.max_turns) return 'max_turns'
  const tokens = (usage?.input_tokens ?? 0) + (usage?.output_tokens ?? 0)
  if (limits.max_tokens !== undefined && tokens > limits.max_tokens) return 'max_tokens'
  const cost = usage?.cost_usd ?? null
  if (limits.max_cost_usd !== undefined && cost !== null && cost > limits.max_cost_usd) return 'max_cost'
  return null
}

/**
 * Counts model responses from a run's steps: one begins with the first message or call after the run's start or
 * after a call's result (a response asks for its calls together; their results go back to the model in the next
 * request). A CLI that runs the calls of one response one after the other, each reported started then ended (codex),
 * is counted a turn per call: a limit then stops it early, never late.
 */
export class TurnCounter {
  #turns = 0
  #responseOpen = false

  take(step: { kind: string; phase?: 'started' | 'completed' }): void {
    if (step.kind === 'usage' || step.kind === 'error') return
    if (step.phase === 'completed') {
      this.#responseOpen = false
      return
    }
    if (!this.#responseOpen) this.#turns++
    this.#responseOpen = true
  }

  get turns(): number {
    return this.#turns
  }
}

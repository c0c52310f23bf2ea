import { Type, type Static } from '@sinclair/typebox'

/** Far past any run a person would pay for, and within what JSON numbers carry exactly. */
const TURNS_MAX = 100_000
const TOKENS_MAX = 1_000_000_000_000
const COST_MAX_USD = 1_000_000

export const RunLimits = Type.Object(
  {
    max_turns: Type.Optional(Type.Integer({
      minimum: 1,
      maximum: TURNS_MAX,
      description: 'Model responses the agent may get (a turn is one response, whatever tool calls it asks for).'
    })),
    max_tokens: Type.Optional(Type.Integer({
      minimum: 1,
      maximum: TOKENS_MAX,
      description: 'Input plus output tokens, as the CLI reports them, summed over the run.'
    })),
    max_cost_usd: Type.Optional(Type.Number({
      exclusiveMinimum: 0,
      maximum: COST_MAX_USD,
      description:
        'Dollars: the CLI’s own figure (claude, opencode), else the operator’s price table (`MODEL_PRICES_FILE`); ' +
        'a tool whose runs’ cost neither gives is 400 `COST_UNKNOWN`.'
    }))
  },
  {
    additionalProperties: false,
    description:
      'How far the agent may go, each at most the operator’s ceiling for the tool (`<AGENT>_MAX_TURNS`, ' +
      '`_MAX_TOKENS`, `_MAX_COST_USD`, which apply when a run names none; above one: 400 `LIMIT_ABOVE_CEILING`). ' +
      'Crossing one stops the agent as its deadline does: `ok: false`, `stop_reason` `max_turns`, `max_tokens` or ' +
      '`max_cost`, the usage so far in the result. Read from the agent’s steps, so crush (plain text) takes none ' +
      '(400 `LIMIT_NOT_SUPPORTED`).'
  }
)
export type RunLimits = Static<typeof RunLimits>

/** Which limit a run crossed, as its stop_reason says. */
export type LimitReason = 'max_turns' | 'max_tokens' | 'max_cost'

/** What a model costs, in dollars per million tokens of each kind: one entry of MODEL_PRICES_FILE. */
export const ModelPrice = Type.Object(
  {
    input_usd_per_mtok: Type.Number({ minimum: 0 }),
    output_usd_per_mtok: Type.Number({ minimum: 0 })
  },
  { additionalProperties: false }
)
export type ModelPrice = Static<typeof ModelPrice>

/** MODEL_PRICES_FILE: prices by model name, as the CLIs name the model they used. */
export const ModelPrices = Type.Record(Type.String({ minLength: 1 }), ModelPrice)
export type ModelPrices = Static<typeof ModelPrices>

/** The operator's price of a model, if its table has one (own entries only: a model named `__proto__` has none). */
export const priceOf = (prices: ModelPrices, model: string | undefined): ModelPrice | undefined =>
  model !== undefined && Object.hasOwn(prices, model) ? prices[model] : undefined

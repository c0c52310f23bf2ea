import type { ParsedReport, StepParser } from '../agents/spec.js'
import type { LimitReason, RunLimits } from '../schemas/limits.js'
import type { RunResult } from '../schemas/run.js'
import type { Step } from '../schemas/steps.js'
import { crossedLimit, NO_PRICING, pricedUsage, type Pricing } from './run-budget.js'
import { StepReader } from './step-reader.js'
import { StepsTally } from './steps-summary.js'

export type StepsReport = Pick<RunResult, 'session_id' | 'usage' | 'steps_summary'> & {
  allDenied: boolean
  parsed: ParsedReport | null
  /** The limit the run went past, seen in its steps (after its agent ended, too: codex reports usage last). */
  limitCrossed: LimitReason | null
}

/** What a run's steps are watched for beside its result: its limits, and what its tokens cost. */
export interface StepsWatch {
  /** Each step, as it is read: for whoever follows the run live. */
  onStep?: (step: Step) => void
  pricing?: Pricing
  limits?: RunLimits
  /** The first limit crossed, once, after the step that crossed it was told. */
  onLimit?: (reason: LimitReason) => void
}

/**
 * One run's steps: read from its stdout as it comes, handed to whoever follows the run live, added up for its
 * result, and held against its limits.
 */
export class RunSteps {
  readonly #parser: StepParser
  readonly #reader: StepReader
  readonly #tally = new StepsTally()
  readonly #watch: StepsWatch
  #limitCrossed: LimitReason | null = null

  constructor(parser: StepParser, watch: StepsWatch = {}) {
    this.#parser = parser
    this.#reader = new StepReader(parser)
    this.#watch = watch
  }

  push(chunk: Buffer): void {
    for (const step of this.#reader.push(chunk)) this.#take(step)
  }

  /** The output has ended: what was still held becomes steps. */
  end(): void {
    for (const step of this.#reader.end()) this.#take(step)
  }

  /**
   * What the result says of the steps, and the CLI's report read in the same pass; a run whose every call was refused
   * is not ok, whatever its exit.
   */
  report(): StepsReport {
    return {
      parsed: this.#parser.report?.() ?? null,
      session_id: this.#parser.session(),
      usage: this.#usage(),
      steps_summary: this.#tally.summary(this.#reader.skipped),
      allDenied: this.#tally.allDenied,
      limitCrossed: this.#limitCrossed
    }
  }

  #usage(): RunResult['usage'] {
    return pricedUsage(this.#tally.usage, this.#watch.pricing ?? NO_PRICING)
  }

  #take(step: Step): void {
    this.#tally.add(step)
    this.#watch.onStep?.(step)
    const { limits } = this.#watch
    if (limits === undefined || this.#limitCrossed !== null) return
    this.#limitCrossed = crossedLimit(limits, this.#tally.turns, this.#usage())
    if (this.#limitCrossed !== null) this.#watch.onLimit?.(this.#limitCrossed)
  }
}

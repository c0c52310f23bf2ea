import type { ParsedReport, StepParser } from '../agents/spec.js'
import type { RunResult } from '../schemas/run.js'
import type { Step } from '../schemas/steps.js'
import { StepReader } from './step-reader.js'
import { StepsTally } from './steps-summary.js'

type StepsReport = Pick<RunResult, 'session_id' | 'usage' | 'steps_summary'> & {
  allDenied: boolean
  parsed: ParsedReport | null
}

/**
 * One run's steps: read from its stdout as it comes, handed to whoever follows the run live, added up for its
 * result.
 */
export class RunSteps {
  readonly #parser: StepParser
  readonly #reader: StepReader
  readonly #tally = new StepsTally()
  readonly #onStep: ((step: Step) => void) | undefined

  constructor(parser: StepParser, onStep?: (step: Step) => void) {
    this.#parser = parser
    this.#reader = new StepReader(parser)
    this.#onStep = onStep
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
      usage: this.#tally.usage,
      steps_summary: this.#tally.summary(this.#reader.skipped),
      allDenied: this.#tally.allDenied
    }
  }

  #take(step: Step): void {
    this.#tally.add(step)
    this.#onStep?.(step)
  }
}

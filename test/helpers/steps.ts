import type { StepParser } from '#src/agents/spec.js'
import { StepReader } from '#src/runs/step-reader.js'
import type { Step } from '#src/schemas/steps.js'

/** An output read into steps as a run would read it, in the chunks `cuts` make (byte offsets, ascending). */
export function readSteps(parser: StepParser, output: Buffer, cuts: number[] = []): { steps: Step[]; skipped: number } {
  const reader = new StepReader(parser)
  const steps: Step[] = []
  let start = 0
  for (const end of [...cuts, output.length]) {
    steps.push(...reader.push(output.subarray(start, end)))
    start = end
  }
  return { steps: [...steps, ...reader.end()], skipped: reader.skipped }
}

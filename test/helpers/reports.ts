import type { AgentSpec, ParsedReport } from '#src/agents/spec.js'
import { RunSteps } from '#src/runs/run-steps.js'

/** What an agent's parser reports of an output, read as a run reads its stdout: line by line, in one pass. */
export function reportOf(spec: AgentSpec, output: string): ParsedReport | null {
  const steps = new RunSteps(spec.steps!())
  steps.push(Buffer.from(output))
  steps.end()
  return steps.report().parsed
}

import type { Step } from '../schemas/steps.js'

const callState = (status: string, exitCode?: number | null): string =>
  status === 'running' ? '' : exitCode === undefined || exitCode === null ? ` (${status})` : ` (exit ${exitCode})`

/**
 * A step as one line of progress text, for the people a client shows progress to (MCP progress, A2A status
 * messages): what runs, what changed, what failed. A call's start and end are two lines, so a long command shows while
 * it runs.
 */
export function stepLine(step: Step): string {
  switch (step.kind) {
    case 'message':
      return step.text
    case 'command':
      return `$ ${step.command}${callState(step.status, step.exit_code)}`
    case 'file_change':
      return `${step.change ?? 'changing'} ${step.path}${callState(step.status)}`
    case 'tool':
      return `${step.name} ${step.input}${callState(step.status)}`
    case 'error':
      return `error: ${step.message}`
    case 'usage':
      return `tokens: ${String(step.input_tokens ?? '?')} in, ${String(step.output_tokens ?? '?')} out` +
        (step.cost_usd === null ? '' : `, $${step.cost_usd}`)
  }
}

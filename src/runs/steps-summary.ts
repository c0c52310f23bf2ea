import { TurnCounter } from './run-budget.js'
import {
  SUMMARY_COMMANDS_MAX, SUMMARY_DENIALS_MAX, SUMMARY_FILES_MAX, type RunUsage, type Step, type StepsSummary
} from '../schemas/steps.js'

/** A run's steps added up as they come, into what its result says it did: bounded lists, counts beyond them. */
export class StepsTally {
  readonly #summary: StepsSummary = {
    commands: [],
    commands_omitted: 0,
    files_changed: [],
    files_omitted: 0,
    tools: {},
    denied: [],
    turns: 0,
    messages: 0,
    errors: 0,
    skipped_lines: 0
  }

  readonly #files = new Map<string, StepsSummary['files_changed'][number]>()
  /** A Map, not the summary's object: a tool named `__proto__` is counted like any other. */
  readonly #tools = new Map<string, number>()
  #usage: RunUsage | null = null
  #succeeded = 0
  readonly #turns = new TurnCounter()

  add(step: Step): void {
    const summary = this.#summary
    this.#turns.take(step)
    if (step.kind === 'message') summary.messages++
    else if (step.kind === 'error') summary.errors++
    else if (step.kind === 'usage') this.#addUsage(step)
    else if (step.phase === 'completed') {
      if (step.status === 'succeeded') this.#succeeded++
      if (step.status === 'denied' && summary.denied.length < SUMMARY_DENIALS_MAX) {
        summary.denied.push({ kind: step.kind, name: nameOf(step), call_id: step.call_id })
      }
      if (step.kind === 'command') this.#addCommand(step)
      else if (step.kind === 'file_change') this.#addFile(step)
      else this.#tools.set(step.name, (this.#tools.get(step.name) ?? 0) + 1)
    }
  }

  /** Every call that ended was refused: the agent did nothing it was asked to, whatever it says. */
  get allDenied(): boolean {
    return this.#summary.denied.length > 0 && this.#succeeded === 0
  }

  summary(skippedLines: number): StepsSummary {
    return {
      ...this.#summary,
      files_changed: [...this.#files.values()],
      tools: Object.fromEntries(this.#tools),
      turns: this.#turns.turns,
      skipped_lines: skippedLines
    }
  }

  get usage(): RunUsage | null {
    return this.#usage
  }

  get turns(): number {
    return this.#turns.turns
  }

  #addCommand(step: Extract<Step, { kind: 'command' }>): void {
    const { commands } = this.#summary
    if (commands.length < SUMMARY_COMMANDS_MAX) {
      commands.push({ command: step.command, exit_code: step.exit_code, status: step.status })
    } else this.#summary.commands_omitted++
  }

  #addFile(step: Extract<Step, { kind: 'file_change' }>): void {
    if (step.status !== 'succeeded') return
    if (this.#files.has(step.path) || this.#files.size < SUMMARY_FILES_MAX) {
      // Created then edited in one run is still created.
      const wasCreated = this.#files.get(step.path)?.change === 'created'
      const change = wasCreated && step.change === 'edited' ? 'created' : step.change
      this.#files.set(step.path, { path: step.path, change })
    } else this.#summary.files_omitted++
  }

  #addUsage(step: Extract<Step, { kind: 'usage' }>): void {
    this.#usage = addUsage(this.#usage, step)
  }
}

/** Usage so far with one more report: totals replace what came before; one more call's usage adds to it. */
function addUsage(before: RunUsage | null, step: Extract<Step, { kind: 'usage' }>): RunUsage {
  const { input_tokens: input, output_tokens: output, cost_usd: cost, model } = step
  return step.cumulative || before === null
    ? { input_tokens: input, output_tokens: output, cost_usd: cost, model }
    : {
        input_tokens: sum(before.input_tokens, input),
        output_tokens: sum(before.output_tokens, output),
        cost_usd: sum(before.cost_usd, cost),
        model: model ?? before.model
      }
}

const sum = (a: number | null, b: number | null): number | null =>
  a === null && b === null ? null : (a ?? 0) + (b ?? 0)

function nameOf(step: Extract<Step, { phase: 'started' | 'completed' }>): string {
  if (step.kind === 'command') return step.command
  if (step.kind === 'file_change') return `${step.tool} ${step.path}`
  return step.name
}

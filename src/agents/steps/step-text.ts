import { STEP_TEXT_MAX, type Step } from '../../schemas/steps.js'
import { isObject } from '../json-values.js'

/**
 * The longest answer a report keeps, in characters: an answer is read whole, beyond the output a run keeps
 * (AGENT_OUTPUT_LIMIT_BYTES), and still bounded whatever the agent writes.
 */
const ANSWER_MAX_CHARS = 1024 * 1024

/** An answer that grows as it comes (deltas, parts), its first ANSWER_MAX_CHARS kept. */
export const answerWith = (answer: string, more: string): string => head(answer + more, ANSWER_MAX_CHARS).text

/** A tool's input shown in one line of at most this many characters. */
const INPUT_SUMMARY_MAX = 1024

/** The first `max` characters, and whether more were cut (a message is read from its start). */
export function head(text: string, max = STEP_TEXT_MAX): { text: string; truncated: boolean } {
  return text.length <= max ? { text, truncated: false } : { text: text.slice(0, max), truncated: true }
}

/** The last `max` characters (a command's output is read from its end: the error, the summary). */
export const tail = (text: string, max = STEP_TEXT_MAX): string => (text.length <= max ? text : text.slice(-max))

/** What a tool was called with, in one bounded line: the field that names its target when there is one. */
export function summarise(input: unknown): string {
  if (isObject(input)) {
    for (const key of ['file_path', 'filePath', 'path', 'pattern', 'url', 'query', 'description']) {
      if (typeof input[key] === 'string') return head(input[key], INPUT_SUMMARY_MAX).text
    }
  }
  return input === undefined ? '' : head(JSON.stringify(input), INPUT_SUMMARY_MAX).text
}

export const message = (text: string): Step => ({ kind: 'message', ...head(text) })

export const failure = (text: string, fatal: boolean): Step => ({ kind: 'error', message: head(text).text, fatal })

/** A number a CLI reported, or null for anything else. */
export const count = (value: unknown): number | null =>
  typeof value === 'number' && Number.isFinite(value) ? value : null

/** Tokens (and cost) as a CLI reported them: `cumulative` when they are the run's totals so far. */
export const usage = (
  reported: { input: unknown; output: unknown; cost?: unknown; model?: string | null },
  cumulative: boolean
): Step => ({
  kind: 'usage',
  input_tokens: count(reported.input),
  output_tokens: count(reported.output),
  cost_usd: count(reported.cost),
  model: reported.model ?? null,
  cumulative
})

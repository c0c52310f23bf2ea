import type { AgentReport } from '../schemas/run.js'

export interface ParsedReport {
  /** The answer text a person reads. */
  text: string
  report: AgentReport
}

const optionalString = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined)

/** A number as the answer can carry it: absent when it is no number, null when JSON could not write it back. */
function optionalNumber(value: unknown, integer = false): number | null | undefined {
  if (typeof value !== 'number') return undefined
  const number = integer ? Math.trunc(value) : value
  return Number.isFinite(number) && (!integer || Number.isSafeInteger(number)) ? number : null
}

/**
 * Claude's `--output-format json` prints one JSON object on one line, `{"type":"result", …}`, after whatever else
 * reached stderr; the last such line is the report.
 */
export function parseClaudeReport(output: string): ParsedReport | null {
  const lines = output.split('\n')
  for (let index = lines.length - 1; index >= 0; index--) {
    const line = lines[index]!.trim()
    if (!line.startsWith('{')) continue
    let candidate: Record<string, unknown>
    try {
      candidate = JSON.parse(line) as Record<string, unknown>
    } catch {
      continue
    }
    if (candidate['type'] !== 'result' || typeof candidate['is_error'] !== 'boolean') continue
    return {
      text: optionalString(candidate['result']) ?? '',
      report: {
        is_error: candidate['is_error'],
        subtype: optionalString(candidate['subtype']),
        session_id: optionalString(candidate['session_id']),
        num_turns: optionalNumber(candidate['num_turns'], true),
        total_cost_usd: optionalNumber(candidate['total_cost_usd']),
        duration_ms: optionalNumber(candidate['duration_ms']),
        duration_api_ms: optionalNumber(candidate['duration_api_ms'])
      }
    }
  }
  return null
}

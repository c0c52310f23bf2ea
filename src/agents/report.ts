import type { AgentReport } from '../schemas/run.js'

export interface ParsedReport {
  /** The answer text a person reads. */
  text: string
  report: AgentReport
}

const optional = <T>(value: unknown, type: 'string' | 'number'): T | undefined =>
  typeof value === type ? (value as T) : undefined

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
    const numTurns = optional<number>(candidate['num_turns'], 'number')
    return {
      text: optional<string>(candidate['result'], 'string') ?? '',
      report: {
        is_error: candidate['is_error'],
        subtype: optional(candidate['subtype'], 'string'),
        session_id: optional(candidate['session_id'], 'string'),
        num_turns: numTurns === undefined ? undefined : Math.trunc(numTurns),
        total_cost_usd: optional(candidate['total_cost_usd'], 'number'),
        duration_ms: optional(candidate['duration_ms'], 'number'),
        duration_api_ms: optional(candidate['duration_api_ms'], 'number')
      }
    }
  }
  return null
}

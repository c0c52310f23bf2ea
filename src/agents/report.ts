import type { AgentReport } from '../schemas/run.js'
import { parseObject, textOf } from './json-values.js'

export interface ParsedReport {
  /** The answer text a person reads. */
  text: string
  report: AgentReport
}

/** A number as the answer can carry it: absent when it is no number, null when JSON could not write it back. */
function optionalNumber(value: unknown, integer = false): number | null | undefined {
  if (typeof value !== 'number') return undefined
  const number = integer ? Math.trunc(value) : value
  return Number.isFinite(number) && (!integer || Number.isSafeInteger(number)) ? number : null
}

/**
 * Claude's report is one JSON object on one line, `{"type":"result", …}`: stream-json's last line (json mode's only
 * one), after whatever else it printed; the last such line is the report.
 */
export function parseClaudeReport(output: string): ParsedReport | null {
  const lines = output.split('\n')
  for (let index = lines.length - 1; index >= 0; index--) {
    const line = lines[index]!.trim()
    const candidate = line.startsWith('{') ? parseObject(line) : undefined
    if (candidate === undefined) continue
    if (candidate['type'] !== 'result' || typeof candidate['is_error'] !== 'boolean') continue
    return {
      text: textOf(candidate['result']) ?? '',
      report: {
        is_error: candidate['is_error'],
        subtype: textOf(candidate['subtype']),
        session_id: textOf(candidate['session_id']),
        num_turns: optionalNumber(candidate['num_turns'], true),
        total_cost_usd: optionalNumber(candidate['total_cost_usd']),
        duration_ms: optionalNumber(candidate['duration_ms']),
        duration_api_ms: optionalNumber(candidate['duration_api_ms'])
      }
    }
  }
  return null
}

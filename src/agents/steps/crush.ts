import type { StepParser } from '../spec.js'
import { message } from './step-text.js'

/**
 * Crush prints plain text, no events: all it says of what it does is its text, read as a message per line as it
 * comes (a paragraph would wait for its blank line; a caller following the run sees each line when it is printed).
 */
export function crushSteps(): StepParser {
  return {
    readsText: true,
    read: (line) => {
      const text = String(line).replace(/\r$/, '')
      return text.trim() === '' ? [] : [message(text)]
    },
    session: () => null
  }
}

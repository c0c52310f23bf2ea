/**
 * The model a CLI says a run used: the one its usage names, when it names one; else the one it announced at its start,
 * when its usage names none (no call made) or names it among others (claude's and gemini's helper models: titles,
 * routing). null when its usage names only others, or nothing names any.
 */
export function modelUsed(used: readonly string[], announced: string | undefined): string | null {
  if (used.length === 1) return used[0]!
  return announced !== undefined && (used.length === 0 || used.includes(announced)) ? announced : null
}

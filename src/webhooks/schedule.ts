/** The longest wait between two attempts, however many failed. */
export const MAX_RETRY_DELAY_MS = 60 * 60 * 1000

/**
 * When the attempt after `failed` failed ones is due, counted from the last: exponential from `baseMs` (base, 2×,
 * 4×… capped at an hour), each spread by ±20 % so that receivers coming back from an outage are not all retried at
 * once. null once the next would fall past `retryForMs` after the event: the delivery is given up.
 */
export function nextAttemptDelay(
  failed: number,
  baseMs: number,
  sinceEventMs: number,
  retryForMs: number,
  random: () => number = Math.random
): number | null {
  const exponential = Math.min(baseMs * 2 ** Math.max(0, failed - 1), MAX_RETRY_DELAY_MS)
  const delay = Math.round(exponential * (0.8 + 0.4 * random()))
  return sinceEventMs + delay > retryForMs ? null : delay
}

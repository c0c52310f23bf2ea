import type { WebhookEventType } from '../schemas/webhooks.js'

/**
 * One event's body, as signed and sent: its type, when it happened, and the run as GET /runs/{id} answers it (as
 * any JSON value: this folder does not know the run's shape).
 */
export const eventBody = (type: WebhookEventType, at: Date, run: unknown): string =>
  JSON.stringify({ type, timestamp: at.toISOString(), data: run })

/**
 * The run.finished of a run whose service died under it, from the body it was armed with (the run as it started):
 * `lost` as the stores say of such a run, ended when that was found, with no result.
 */
export function lostRunBody(armed: string, at: Date): string {
  const { data } = JSON.parse(armed) as { data: Record<string, unknown> }
  return eventBody('run.finished', at, { ...data, status: 'lost', finished_at: at.toISOString(), result: null })
}

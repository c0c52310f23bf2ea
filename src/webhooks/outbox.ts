import type { WebhookEventType } from '../schemas/webhooks.js'

/** One try at one delivery, as GET /runs/{id}/deliveries lists it. */
export interface DeliveryAttempt {
  at: string
  /** The receiver's status code; null when none came (refused, no answer in time, an address refused). */
  status: number | null
  error: string | null
  durationMs: number
}

/**
 * - `armed`: a run.finished waiting for its run's end (its body the run as it started, made `lost` if its replica
 *   dies first);
 * - `pending`: due at `nextAttemptAt`;
 * - `delivered` (a 2xx), `gone` (a 410: the receiver wants no more), `given_up` (WEBHOOK_RETRY_FOR_MS passed, or its
 *   token no longer has a secret): nothing more is tried.
 */
export type DeliveryState = 'armed' | 'pending' | 'delivered' | 'gone' | 'given_up'

/**
 * A delivery in A2A's push-notification form rather than Standard Webhooks': sent with the credentials its receiver
 * gave (no token's secret needed; signed too when the token has one), its body A2A's JSON.
 */
export interface PushForm {
  /** The push-notification config it is for (A2A's id). */
  config: string
  /** What the receiver asked to be sent: `X-A2A-Notification-Token`, or `Authorization`. */
  headers: Record<string, string>
  /** The end to send if its run is lost (its replica died first), prepared as it was armed; null for a start. */
  lostBody: string | null
}

/** One event of one run for its receiver, kept in the run store until delivered (at least once) or given up. */
export interface WebhookDelivery {
  /** The `webhook-id` header: the same on every attempt, so a receiver can drop a repeat. */
  id: string
  run: string
  caller: string
  type: WebhookEventType
  url: string
  /** The event's JSON as signed at each attempt (`type`, `timestamp`, `data`: the run as GET /runs/{id} answers). */
  body: string
  createdAt: string
  /** The replica whose run it waits for, while armed. */
  replica: string
  state: DeliveryState
  attempts: DeliveryAttempt[]
  nextAttemptAt: string | null
  /** Absent: a Standard Webhooks event, signed with its token's secrets. */
  push?: PushForm
}

/** What follows an attempt: due again, or ended. */
export type AfterAttempt =
  | { state: 'pending'; nextAttemptAt: string }
  | { state: 'delivered' | 'gone' | 'given_up'; nextAttemptAt: null }

/**
 * Where deliveries wait: the run store itself (memory, SQLite, Redis), so that a restart, a crash or, in a fleet, the
 * death of the replica that ran the run loses none of them.
 */
export interface WebhookOutbox {
  /** A run's deliveries, as its agent starts: its run.started pending, its run.finished armed. */
  addDeliveries(deliveries: readonly WebhookDelivery[]): Promise<void>
  /** An armed delivery's run has ended: this is its body, due now. A delivery not armed is left as it is. */
  fireDelivery(id: string, body: string, at: Date): Promise<void>
  /** A delivery its receiver no longer wants (its A2A config deleted): `gone`, unless it had ended. */
  dropDelivery(id: string): Promise<void>
  /** Pending deliveries due by `now`, the most overdue first, at most `max`. */
  dueDeliveries(now: Date, max: number): Promise<WebhookDelivery[]>
  /** Armed deliveries whose replica is gone, on this service or (a fleet) on any: their runs will never end. */
  orphanedDeliveries(): Promise<WebhookDelivery[]>
  /** One attempt at a time, whichever replica makes it: false while another holds the delivery. */
  claimDelivery(id: string, holder: string, ttlMs: number): Promise<boolean>
  /** Gives a claim back unused (the delivery was no longer due): only the holder's own. */
  releaseDelivery(id: string, holder: string): Promise<void>
  /** Records an attempt and what follows it; releases the claim. */
  recordAttempt(id: string, attempt: DeliveryAttempt, after: AfterAttempt): Promise<void>
  /** A run's deliveries, oldest first. */
  deliveriesOf(run: string): Promise<WebhookDelivery[]>
  /** How many are pending, for the gauge. */
  pendingDeliveries(): Promise<number>
}

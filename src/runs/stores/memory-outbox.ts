import type {
  AfterAttempt, DeliveryAttempt, WebhookDelivery, WebhookOutbox
} from '../../webhooks/outbox.js'
import { LocalClaims } from './local-claims.js'

const copy = (delivery: WebhookDelivery): WebhookDelivery => ({ ...delivery, attempts: [...delivery.attempts] })

/**
 * Deliveries in this process's memory, beside its runs: a restart forgets them as it forgets the runs. Nothing can be
 * orphaned here, since the runs die with the deliveries that wait for them.
 */
export class MemoryOutbox implements WebhookOutbox {
  readonly #deliveries = new Map<string, WebhookDelivery>()
  readonly #claims = new LocalClaims()
  readonly #retentionMs: number

  constructor(retentionMs: number) {
    this.#retentionMs = retentionMs
  }

  async addDeliveries(deliveries: readonly WebhookDelivery[]): Promise<void> {
    this.#prune()
    for (const delivery of deliveries) this.#deliveries.set(delivery.id, copy(delivery))
  }

  async fireDelivery(id: string, body: string, at: Date): Promise<void> {
    const delivery = this.#deliveries.get(id)
    if (delivery?.state !== 'armed') return
    Object.assign(delivery, { body, state: 'pending', nextAttemptAt: at.toISOString() })
  }

  async dropDelivery(id: string): Promise<void> {
    const delivery = this.#deliveries.get(id)
    if (delivery?.state === 'armed' || delivery?.state === 'pending') {
      Object.assign(delivery, { state: 'gone', nextAttemptAt: null })
    }
  }

  async dueDeliveries(now: Date, max: number): Promise<WebhookDelivery[]> {
    return [...this.#deliveries.values()]
      .filter((delivery) => delivery.state === 'pending' && Date.parse(delivery.nextAttemptAt!) <= now.getTime())
      .sort((a, b) => a.nextAttemptAt!.localeCompare(b.nextAttemptAt!))
      .slice(0, max)
      .map(copy)
  }

  async orphanedDeliveries(): Promise<WebhookDelivery[]> {
    return []
  }

  async claimDelivery(id: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.#claims.claim(id, holder, ttlMs)
  }

  async releaseDelivery(id: string, holder: string): Promise<void> {
    this.#claims.release(id, holder)
  }

  async recordAttempt(id: string, attempt: DeliveryAttempt, after: AfterAttempt): Promise<void> {
    const delivery = this.#deliveries.get(id)
    if (delivery !== undefined) {
      delivery.attempts.push(attempt)
      Object.assign(delivery, after)
    }
    this.#claims.releaseAny(id)
  }

  async deliveriesOf(run: string): Promise<WebhookDelivery[]> {
    return [...this.#deliveries.values()].filter((delivery) => delivery.run === run).map(copy)
  }

  async pendingDeliveries(): Promise<number> {
    return [...this.#deliveries.values()].filter((delivery) => delivery.state === 'pending').length
  }

  /** Ended deliveries are kept as long as finished runs are, from their last attempt. */
  #prune(): void {
    const cutoff = Date.now() - this.#retentionMs
    for (const [id, delivery] of this.#deliveries) {
      // Ended at its last attempt, or (dropped before any) when it was made.
      const endedAt = delivery.attempts.at(-1)?.at ?? delivery.createdAt
      if (delivery.nextAttemptAt === null && delivery.state !== 'armed' && Date.parse(endedAt) < cutoff) {
        this.#deliveries.delete(id)
      }
    }
  }
}

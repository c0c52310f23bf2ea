import type { WebhookDeliveryState } from '../schemas/webhooks.js'
import type { WebhookDelivery } from '../webhooks/outbox.js'

/** A delivery as GET /runs/{id}/deliveries lists it: never its body nor anything that signs it. */
export const deliveryState = (delivery: WebhookDelivery): WebhookDeliveryState => ({
  id: delivery.id,
  type: delivery.type,
  url: delivery.url,
  state: delivery.state === 'armed' ? 'waiting' : delivery.state,
  created_at: delivery.createdAt,
  next_attempt_at: delivery.nextAttemptAt,
  attempts: delivery.attempts.map(({ at, status, error, durationMs }) => ({
    at, status, error, duration_ms: durationMs
  }))
})

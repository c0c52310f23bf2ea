import { Type, type Static } from '@sinclair/typebox'

/** The events a run may be delivered for. */
export const WEBHOOK_EVENTS = ['run.started', 'run.finished'] as const

export const WebhookEventType = Type.Union([Type.Literal(WEBHOOK_EVENTS[0]), Type.Literal(WEBHOOK_EVENTS[1])], {
  description: 'run.started: its agent started; run.finished: it ended, however (succeeded, failed, timed_out, ' +
    'cancelled, lost).'
})
export type WebhookEventType = Static<typeof WebhookEventType>

/** What a run asks to be told of, and where: a URL of the caller's, never a secret. */
export const RunWebhook = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: 2048,
      description:
        'Where each event is POSTed: an http or https URL of a public address (others need WEBHOOK_ALLOW_HOSTS), ' +
        'without credentials; redirects are not followed.'
    }),
    events: Type.Optional(Type.Array(WebhookEventType, {
      minItems: 1,
      uniqueItems: true,
      description: 'Which events to deliver; default ["run.finished"].'
    }))
  },
  {
    additionalProperties: false,
    description:
      'Tell a receiver when the run starts or ends, signed (Standard Webhooks) and retried until it answers 2xx: ' +
      'see the `webhooks` of this document.'
  }
)
export type RunWebhook = Static<typeof RunWebhook>

export const DEFAULT_WEBHOOK_EVENTS: WebhookEventType[] = ['run.finished']

/** A run's webhook as the API lists it: what it asked for, the default filled in. */
export const ListedWebhook = Type.Object({
  url: Type.String(),
  events: Type.Array(WebhookEventType)
}, { description: 'The webhook the run asked for.' })
export type ListedWebhook = Static<typeof ListedWebhook>

const Attempt = Type.Object({
  at: Type.String({ format: 'date-time' }),
  status: Type.Union([Type.Integer(), Type.Null()], {
    description: 'The receiver’s status code; null when none came (refused, no answer within 10 s, an address refused).'
  }),
  error: Type.Union([Type.String(), Type.Null()]),
  duration_ms: Type.Integer()
})

export const WebhookDeliveryState = Type.Object(
  {
    id: Type.String({ description: 'The `webhook-id` of every attempt of this event.' }),
    type: WebhookEventType,
    url: Type.String(),
    state: Type.Union(
      [
        Type.Literal('waiting'), Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('gone'),
        Type.Literal('given_up')
      ],
      {
        description:
          'waiting: for the run to end; pending: due at next_attempt_at; delivered: a 2xx came; gone: the receiver ' +
          'answered 410; given_up: no 2xx within WEBHOOK_RETRY_FOR_MS, or the token no longer has a secret.'
      }
    ),
    created_at: Type.String({ format: 'date-time' }),
    next_attempt_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    attempts: Type.Array(Attempt)
  },
  { $id: 'WebhookDelivery', title: 'WebhookDelivery', description: 'One event of a run for its receiver.' }
)
export type WebhookDeliveryState = Static<typeof WebhookDeliveryState>

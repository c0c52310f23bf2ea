import { Type, type Static } from '@sinclair/typebox'
import type { OpenAPIV3_1 as OpenApi } from 'openapi-types'
import { ref } from './ref.js'
import { RunState } from './runs.js'
import { WebhookEventType } from './webhooks.js'

/** The body of every delivery: what happened, when, and the run. */
export const WebhookEvent = Type.Object(
  {
    type: WebhookEventType,
    timestamp: Type.String({ format: 'date-time', description: 'When it happened (the same on every attempt).' }),
    data: ref(RunState, { description: 'The run as GET /runs/{id} answers it at that moment.' })
  },
  { $id: 'WebhookEvent', title: 'WebhookEvent', description: 'A run’s event, as POSTed to its webhook’s URL.' }
)
export type WebhookEvent = Static<typeof WebhookEvent>

const HEADERS = {
  'webhook-id': 'The event’s id, the same on every attempt: a receiver drops a repeat by it.',
  'webhook-timestamp': 'When this attempt was signed, in seconds since 1970: a receiver refuses one too old.',
  'webhook-signature':
    '`v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` with the token’s secret; ' +
    'several, space-separated, during a secret’s rotation.'
}

/** One entry of the document's `webhooks` (OpenAPI 3.1): a POST of the event, signed as Standard Webhooks says. */
const webhookOperation = (type: WebhookEvent['type'], summary: string): OpenApi.PathItemObject => ({
  post: {
    operationId: type === 'run.started' ? 'runStarted' : 'runFinished',
    summary,
    description:
      'Signed as [Standard Webhooks](https://www.standardwebhooks.com/) says, with the secret of the token that ' +
      'started the run (WEBHOOK_SECRET or WEBHOOK_SECRETS); verify it with the `standardwebhooks` package or svix’s ' +
      'verifier. Delivered at least once: anything but a 2xx within 10 s is retried (WEBHOOK_RETRY_BASE_MS, ' +
      'WEBHOOK_RETRY_FOR_MS); 410 stops the retries.',
    parameters: Object.entries(HEADERS).map(([name, description]) => ({
      name, in: 'header', required: true, description, schema: { type: 'string' as const }
    })),
    requestBody: {
      required: true,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/WebhookEvent' } } }
    },
    responses: {
      '2XX': { description: 'Delivered: no more attempts.' },
      410: { description: 'Gone: the receiver wants no more of this delivery, which is not retried.' },
      default: { description: 'Anything else (and no answer within 10 s): retried later.' }
    }
  }
})

export const WEBHOOKS = {
  'run.started': webhookOperation('run.started', 'A run’s agent started'),
  'run.finished': webhookOperation('run.finished', 'A run ended: succeeded, failed, timed_out, cancelled or lost')
}

import { Webhook } from 'standardwebhooks'

/** A Standard Webhooks secret: `whsec_` and the base64 of at least 24 random bytes (svix's own are 24). */
const SECRET = /^whsec_[A-Za-z0-9+/]+={0,2}$/
const MIN_SECRET_BYTES = 24

export function assertWebhookSecret(secret: string, where: string): void {
  if (!SECRET.test(secret) || Buffer.from(secret.slice('whsec_'.length), 'base64').length < MIN_SECRET_BYTES) {
    throw new Error(
      `${where}: a webhook secret is whsec_ and the base64 of at least ${String(MIN_SECRET_BYTES)} random bytes ` +
        '(e.g. `echo whsec_$(openssl rand -base64 32)`)'
    )
  }
}

/** The headers of one delivery of one event, the same id on every attempt. */
export interface SignedHeaders {
  'webhook-id': string
  'webhook-timestamp': string
  'webhook-signature': string
}

/**
 * Signs with every secret given, their signatures space-separated as Standard Webhooks allows: during a rotation the
 * receiver verifies with the old secret or the new one, whichever it has.
 */
export function signedHeaders(secrets: readonly string[], id: string, at: Date, body: string): SignedHeaders {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': secrets.map((secret) => new Webhook(secret).sign(id, at, body)).join(' ')
  }
}

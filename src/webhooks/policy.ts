import { urlRefusal, type WebhookAllowList } from './address-policy.js'
import { secretsOf, type WebhookSecrets } from './secrets.js'
import { checkedTarget, WebhookTargetRefused } from './target.js'

/** Why a run's webhook is refused as it is asked for, before any slot or agent; null when it is accepted. */
export type WebhookRefusal =
  | { code: 'WEBHOOKS_NOT_CONFIGURED' }
  | { code: 'WEBHOOK_URL_NOT_ALLOWED'; reason: string }

export interface WebhookSettings {
  secrets: WebhookSecrets
  allow: WebhookAllowList
  /** The first retry after this, then twice as long each time (capped at an hour). */
  retryBaseMs: number
  /** No attempt is made past this long after the event. */
  retryForMs: number
}

/**
 * Checks what can be checked now: a secret for the caller (for a delivery it signs: not an A2A push, sent with its
 * receiver's own credentials), a URL of the right kind, and a host that resolves to
 * addresses it may reach. A name that does not resolve now is accepted: DNS may be down for a moment, and each attempt
 * resolves it again, checked again.
 */
export async function webhookRefusal(
  settings: Pick<WebhookSettings, 'secrets' | 'allow'>,
  caller: string,
  text: string,
  signed = true
): Promise<WebhookRefusal | null> {
  if (signed && secretsOf(settings.secrets, caller).length === 0) return { code: 'WEBHOOKS_NOT_CONFIGURED' }
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return { code: 'WEBHOOK_URL_NOT_ALLOWED', reason: 'not an absolute URL' }
  }
  const refusal = urlRefusal(url, settings.allow)
  if (refusal !== null) return { code: 'WEBHOOK_URL_NOT_ALLOWED', reason: refusal }
  try {
    await checkedTarget(url, settings.allow)
    return null
  } catch (error) {
    if (!(error instanceof WebhookTargetRefused)) throw error
    return error.unresolved ? null : { code: 'WEBHOOK_URL_NOT_ALLOWED', reason: error.message }
  }
}

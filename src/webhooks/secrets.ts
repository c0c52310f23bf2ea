import { assertWebhookSecret } from './signature.js'

/** Each token's webhook secrets, newest last; `*` are every token's (WEBHOOK_SECRET). */
export type WebhookSecrets = ReadonlyMap<string, readonly string[]>

const EVERY_TOKEN = '*'

/**
 * WEBHOOK_SECRET (every token's) and WEBHOOK_SECRETS (`name:whsec_…,…`, a name given twice during a rotation): a
 * token's own secrets replace the shared one.
 */
export function parseWebhookSecrets(shared: string, perToken: readonly string[]): WebhookSecrets {
  const secrets = new Map<string, string[]>()
  if (shared !== '') {
    assertWebhookSecret(shared, 'WEBHOOK_SECRET')
    secrets.set(EVERY_TOKEN, [shared])
  }
  for (const entry of perToken) {
    const colon = entry.indexOf(':')
    const name = entry.slice(0, colon)
    const secret = entry.slice(colon + 1)
    if (colon <= 0) throw new Error('WEBHOOK_SECRETS: each entry is name:whsec_… (the token’s name in API_TOKENS)')
    assertWebhookSecret(secret, `WEBHOOK_SECRETS (${name})`)
    secrets.set(name, [...(secrets.get(name) ?? []), secret])
  }
  return secrets
}

/** What signs a caller's deliveries; empty when webhooks are not configured for it. */
export const secretsOf = (secrets: WebhookSecrets, caller: string): readonly string[] =>
  secrets.get(caller) ?? secrets.get(EVERY_TOKEN) ?? []

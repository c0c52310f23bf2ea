import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import { addressAllowed, canonicalHost, literalAddress, urlRefusal, type WebhookAllowList } from './address-policy.js'

/** Where one attempt connects: the address that was checked, never a second lookup's (DNS rebinding). */
export interface CheckedTarget {
  url: URL
  address: string
  family: 4 | 6
}

export class WebhookTargetRefused extends Error {
  /** The name gave no address now: maybe for a moment (DNS down), where a refusal is for good. */
  readonly unresolved: boolean
  constructor(message: string, unresolved = false) {
    super(message)
    this.name = 'WebhookTargetRefused'
    this.unresolved = unresolved
  }
}

export type Resolver = (host: string) => Promise<Array<{ address: string; family: number }>>

const systemResolver: Resolver = async (host) => lookup(host, { all: true, verbatim: true })

/**
 * Resolves the URL's host now and checks what it resolves to. A name the operator allowed may resolve anywhere;
 * any other is refused if any of its addresses is not public, so a name that mixes a public and an internal address
 * cannot be made to reach the internal one.
 */
export async function checkedTarget(
  url: URL,
  allow: WebhookAllowList,
  resolve: Resolver = systemResolver
): Promise<CheckedTarget> {
  const refusal = urlRefusal(url, allow)
  if (refusal !== null) throw new WebhookTargetRefused(refusal)
  const literal = literalAddress(url.hostname)
  if (literal !== undefined) return { url, address: literal, family: isIP(literal) === 6 ? 6 : 4 }
  const host = canonicalHost(url.hostname)
  let addresses: Array<{ address: string; family: number }>
  try {
    addresses = await resolve(host)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error'
    throw new WebhookTargetRefused(`${host} does not resolve: ${code}`, true)
  }
  const first = addresses[0]
  if (first === undefined) throw new WebhookTargetRefused(`${host} resolves to no address`, true)
  if (!allow.hosts.has(host)) {
    const internal = addresses.find(({ address }) => !addressAllowed(address, allow))
    if (internal !== undefined) {
      throw new WebhookTargetRefused(`${host} resolves to ${internal.address}, not a public address`)
    }
  }
  return { url, address: first.address, family: first.family === 6 ? 6 : 4 }
}

import ipaddr from 'ipaddr.js'

/**
 * What an operator lets webhooks reach although it is not public (WEBHOOK_ALLOW_HOSTS): host names, compared without
 * their trailing dot and case, and address ranges (a bare address is a range of one).
 */
export interface WebhookAllowList {
  hosts: ReadonlySet<string>
  ranges: ReadonlyArray<[ipaddr.IPv4 | ipaddr.IPv6, number]>
}

export const NOTHING_ALLOWED: WebhookAllowList = { hosts: new Set(), ranges: [] }

/** A host name as DNS compares it: `Example.COM.` is `example.com`. */
export const canonicalHost = (host: string): string => host.toLowerCase().replace(/\.+$/, '')

/** The entries of WEBHOOK_ALLOW_HOSTS (comma-separated names, addresses and CIDRs); throws on a malformed range. */
export function parseAllowList(entries: readonly string[]): WebhookAllowList {
  const hosts = new Set<string>()
  const ranges: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]> = []
  for (const entry of entries) {
    if (entry.includes('/')) {
      try {
        ranges.push(ipaddr.parseCIDR(entry))
      } catch {
        throw new Error(`WEBHOOK_ALLOW_HOSTS: ${entry} is not a CIDR range (e.g. 10.0.0.0/8, fd00::/8)`)
      }
    } else if (ipaddr.isValid(entry)) {
      const address = ipaddr.parse(entry)
      ranges.push([address, address.kind() === 'ipv4' ? 32 : 128])
    } else {
      hosts.add(canonicalHost(entry))
    }
  }
  return { hosts, ranges }
}

/**
 * An IPv6 address that carries an IPv4 one (`::ffff:127.0.0.1`) is judged as that IPv4 address, as the socket would
 * reach it.
 */
const normalized = (address: string): ipaddr.IPv4 | ipaddr.IPv6 => ipaddr.process(address.replace(/^\[|\]$/g, ''))

/**
 * The only IPv6 block given out for public unicast: anything else ipaddr.js calls `unicast` (the IPv4-compatible
 * `::a.b.c.d`, unassigned space) is no public receiver.
 */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3')

/**
 * Whether a webhook may connect to `address`: a public unicast address, or one the allow list names. Everything
 * ipaddr.js does not call `unicast` is refused: loopback, private, link-local (cloud metadata at 169.254.169.254),
 * CGNAT, unique-local (fd00:ec2::254), multicast, unspecified, reserved, the IPv6 forms that embed an IPv4 address
 * a relay would reach (6to4, NAT64, Teredo), and IPv6 outside 2000::/3.
 */
export function addressAllowed(address: string, allow: WebhookAllowList): boolean {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6
  try {
    parsed = normalized(address)
  } catch {
    return false
  }
  if (allow.ranges.some(([range, bits]) => range.kind() === parsed.kind() && parsed.match(range, bits))) return true
  if (parsed.kind() === 'ipv6' && !parsed.match(GLOBAL_UNICAST_V6)) return false
  return parsed.range() === 'unicast'
}

/** An IP literal as a URL's hostname writes it (`127.0.0.1`, `[::1]`), or undefined for a name. */
export function literalAddress(hostname: string): string | undefined {
  const bare = hostname.replace(/^\[|\]$/g, '')
  return ipaddr.isValid(bare) ? bare : undefined
}

/** Why a webhook URL is refused before anything is sent, or null when it may be tried. */
export function urlRefusal(url: URL, allow: WebhookAllowList): string | null {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'only http and https URLs are delivered to'
  // Credentials in the URL would be listed with the run (GET /runs/{id}) and logged: a receiver authenticates by the
  // signature instead.
  if (url.username !== '' || url.password !== '') return 'a URL may not carry credentials'
  const literal = literalAddress(url.hostname)
  if (literal !== undefined) return addressAllowed(literal, allow) ? null : `${literal} is not a public address`
  const host = canonicalHost(url.hostname)
  if (host === '' || host === 'localhost' || host.endsWith('.localhost')) {
    return allow.hosts.has(host) ? null : `${host || 'an empty host'} is not a public host`
  }
  return null
}

import type { FastifyInstance } from 'fastify'
import { serviceError } from '../errors.js'

/** The names a browser uses for this machine: a page can only reach the service under one of these without a rebind. */
const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1']

/** A Host header's name, without its port; IPv6 literals lose their brackets. */
export function hostName(host: string): string {
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d*$/, '')
  return name.toLowerCase()
}

export function allowedHostNames(listenHost: string, configured: string[]): Set<string> {
  const names = new Set([...LOOPBACK_NAMES, ...configured.map((name) => name.toLowerCase())])
  if (!['0.0.0.0', '::'].includes(listenHost)) names.add(hostName(listenHost))
  return names
}

/**
 * Without tokens, the address is the only lock, and DNS rebinding opens it: a web page whose name suddenly resolves to
 * 127.0.0.1 sends requests that the browser deems same-origin, with its own name in Host. So every request must name
 * this machine in Host, and a browser's Origin (when sent) must too. `*` in ALLOWED_HOSTS turns the check off.
 */
export function requireKnownHost(scope: FastifyInstance, allowed: Set<string>): void {
  if (allowed.has('*')) return
  scope.addHook('onRequest', async (request) => {
    const host = request.headers.host
    if (host !== undefined && !allowed.has(hostName(host))) throw serviceError('HOST_NOT_ALLOWED', host)
    const origin = request.headers.origin
    if (origin === undefined) return
    let originHost: string
    try {
      originHost = new URL(origin).host
    } catch {
      // `null` (a sandboxed frame, a file) or garbage: no page of this machine's own
      throw serviceError('ORIGIN_NOT_ALLOWED', origin)
    }
    if (!allowed.has(hostName(originHost))) throw serviceError('ORIGIN_NOT_ALLOWED', origin)
  })
}

import type { FastifyInstance } from 'fastify'
import { readFileSync } from 'node:fs'

/**
 * Everything the page may load or reach is its own origin's; nothing inline runs or styles (the page has no inline
 * script and no style attribute), nothing frames it, and DOM sinks take no strings (it builds nodes, never HTML).
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'"
].join('; ')

/** The page's files, served as they are in the repository's console/ directory: no build, no CDN. */
const FILES: Record<string, { path: string; type: string }> = {
  '/console': { path: 'index.html', type: 'text/html; charset=utf-8' },
  '/console/console.js': { path: 'console.js', type: 'text/javascript; charset=utf-8' },
  '/console/console.css': { path: 'console.css', type: 'text/css; charset=utf-8' },
  '/console/icon.svg': { path: 'icon.svg', type: 'image/svg+xml' }
}

/** dist/http/ and src/http/ are both two levels below the repository, where console/ is. */
const CONSOLE_DIR = new URL('../../console/', import.meta.url)

/**
 * The operator console (docs/console.md): static files whose script calls the API with the token the operator typed,
 * so it sees exactly what that token sees. Read once, at startup: a missing file fails the start, not a page view.
 */
export async function consoleRoutes(app: FastifyInstance): Promise<void> {
  for (const [url, { path, type }] of Object.entries(FILES)) {
    const body = readFileSync(new URL(path, CONSOLE_DIR))
    // Hidden from the OpenAPI document: a page for people, not part of the API's contract.
    app.get(url, { schema: { hide: true } }, async (_request, reply) =>
      reply
        .type(type)
        .header('content-security-policy', CONSOLE_CSP)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .header('cache-control', 'no-cache')
        .send(body))
  }
}

import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { extname } from 'node:path'
import { CONSOLE_CSP } from '#src/http/console.js'
import { build, fromRoot } from '../helpers/index.js'

// The console's files as the service serves them (src/http/console.ts); the page itself, in a browser:
// console-browser.test.ts.

/** The type each kind of file must be served with: a file of another kind in console/ fails the test until named. */
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml'
}

/** Every file of console/, where it is served (the page itself at /console) and as what. */
const FILES = readdirSync(fromRoot('console')).map((name) =>
  [name === 'index.html' ? '/console' : `/console/${name}`, `console/${name}`, TYPES[extname(name)]] as const)

t.test('each file is served as it is in console/, with its type, a strict CSP and no sniffing', async (t) => {
  const app = await build(t, { API_TOKENS: 'alice:secret-a' })
  for (const [url, path, type] of FILES) {
    const response = await app.inject({ method: 'GET', url })
    t.equal(response.statusCode, 200, `${url}: no token needed to load the page (it asks for one)`)
    t.equal(response.headers['content-type'], type, url)
    t.equal(response.body, readFileSync(fromRoot(path), 'utf8'), url)
    t.equal(response.headers['content-security-policy'], CONSOLE_CSP, url)
    t.equal(response.headers['x-content-type-options'], 'nosniff', url)
    t.equal(response.headers['referrer-policy'], 'no-referrer', url)
  }
  t.equal(
    (await app.inject({ method: 'GET', url: '/console/../package.json' })).statusCode, 404,
    'nothing else of the repository'
  )
})

t.test('the CSP lets only the page’s own files run, style and connect; nothing frames it', async (t) => {
  const directives = new Map(CONSOLE_CSP.split('; ').map((directive) => {
    const [name, ...values] = directive.split(' ')
    return [name!, values]
  }))
  for (const name of ['default-src', 'script-src', 'style-src', 'connect-src', 'img-src']) {
    t.same(directives.get(name), ["'self'"], name)
  }
  t.same(directives.get('frame-ancestors'), ["'none'"])
  t.same(directives.get('object-src'), ["'none'"])
  t.same(directives.get('base-uri'), ["'none'"])
  t.notMatch(CONSOLE_CSP, /unsafe|data:|\*/, 'no inline, eval, data: or wildcard source')
})

t.test('the page has no inline script, no inline style and no inline handler: the CSP would refuse them', async (t) => {
  const html = readFileSync(fromRoot('console/index.html'), 'utf8')
  const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)]
  t.ok(scripts.length > 0, 'the page has its script')
  for (const [, attributes, body] of scripts) {
    t.match(attributes, /\bsrc="\/console\/[^"]+"/, 'loaded from the service')
    t.equal(body!.trim(), '', 'no inline code')
  }
  t.notMatch(html, /<style\b|\sstyle=|\son[a-z]+=|javascript:/i)
})

/**
 * The Content-Security-Policy of /docs: Swagger UI's own (its inline script's and styles' hashes), narrowed to this
 * service. No page may frame it (a framed "Try it out" is a click away from running an agent), nothing loads from
 * elsewhere (its defaults allow any https: font and style, and an image from validator.swagger.io), and requests are
 * not upgraded to https (a plain-http deployment would load nothing).
 */
export function docsPolicy(swaggerUiPolicy: string): string {
  const directives = new Map(
    swaggerUiPolicy
      .split(';')
      .map((directive) => directive.trim().split(/\s+/))
      .filter(([name]) => name !== undefined && name !== '')
      .map(([name, ...sources]): [string, string[]] => [name!, sources])
  )
  directives.delete('upgrade-insecure-requests')
  for (const [name, sources] of directives) {
    directives.set(name, sources.filter((source) => source !== 'https:' && source !== 'validator.swagger.io'))
  }
  directives.set('frame-ancestors', ["'none'"])
  directives.set('form-action', ["'self'"])
  return [...directives].map(([name, sources]) => [name, ...sources].join(' ')).join('; ')
}

import { readFileSync } from 'node:fs'

/** This service's version, read from package.json (beside src/ and dist/ alike) so that nothing can lag it. */
export const { version } = JSON.parse(
  readFileSync(new URL('../package.json', import.meta.url), 'utf8')
) as { version: string }

// `npm run openapi`: writes openapi.yaml from the routes (after `npm run build`); the client types follow in the same
// npm script. test/http/openapi.test.ts fails whenever either file differs from what this produces.
import { writeFileSync } from 'node:fs'
import { renderOpenApiYaml } from '../dist/http/openapi-document.js'

writeFileSync(new URL('../openapi.yaml', import.meta.url), await renderOpenApiYaml())

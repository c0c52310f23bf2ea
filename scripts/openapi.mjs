// `npm run openapi`: writes openapi.yaml (3.1) and openapi-3.2.yaml from the routes (after `npm run build`); the client
// types follow in the same npm script. test/http/openapi.test.ts fails whenever a file differs from what this produces.
import { writeFileSync } from 'node:fs'
import { renderOpenApiYaml } from '../dist/service/openapi-document.js'

const { v31, v32 } = await renderOpenApiYaml()
writeFileSync(new URL('../openapi.yaml', import.meta.url), v31)
writeFileSync(new URL('../openapi-3.2.yaml', import.meta.url), v32)

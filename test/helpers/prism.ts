import { Ajv2020 } from 'ajv/dist/2020.js'
import type { Test } from 'tap'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse as parseYaml } from 'yaml'
import { npmTool } from './npm-tool.js'
import { freePort } from './redis.js'
import { ROOT } from './root.js'
import { waitFor } from './processes.js'

export interface Violation { location: string[], message: string, code?: string }

/**
 * A Prism proxy in front of `upstream`; its `sl-violations` header lists what broke openapi.yaml. On a free port: one
 * that another file took between freePort() and Prism's listen is given up for another (files run side by side).
 */
export async function startPrism(t: Test, upstream: string, attempt = 1): Promise<string> {
  const prismBin = await npmTool('@stoplight/prism-cli', '5.16.0', 'prism')
  const port = await freePort()
  const prism = spawn(
    prismBin, ['proxy', join(ROOT, 'openapi.yaml'), upstream, '--host', '127.0.0.1', '--port', String(port)],
    { stdio: ['ignore', 'pipe', 'pipe'] }
  )
  t.teardown(() => prism.kill('SIGKILL'))
  let seen = ''
  prism.stdout.on('data', (chunk) => (seen += chunk))
  await waitFor(() => seen.includes('Prism is listening') || prism.exitCode !== null, 60_000, 'Prism to listen')
  if (prism.exitCode === null) return `http://127.0.0.1:${port}`
  if (attempt < 3) return startPrism(t, upstream, attempt + 1)
  throw new Error(`prism exited: ${seen}`)
}

export const STREAM_MEDIA_TYPES = ['application/x-ndjson', 'text/event-stream']

/**
 * Prism 5 reads a stream's schema as its whole body's: OpenAPI 3.1 has no other place for a stream's items, and the
 * document puts RunEvent there for generated clients. What Prism then says of the body (a string is not a RunEvent,
 * so no branch of its anyOf) says nothing about the stream: its items are checked against the 3.2 document's
 * itemSchema instead (streamProblems). Everything else Prism checks, a stream's status and headers among them, stands.
 */
export function violationsOf(
  violations: Violation[], mediaType: string, of: 'request' | 'response' | 'both' = 'response'
): Violation[] {
  const bodyReadAsItem = (violation: Violation) =>
    STREAM_MEDIA_TYPES.includes(mediaType) && violation.location.join('.') === 'response.body'
  const inScope = (violation: Violation) => of === 'both' || violation.location[0] === of
  return violations.filter((violation) => inScope(violation) && !bodyReadAsItem(violation))
}

type Json = Record<string, any>
let read32: Json | undefined
/** Read once per test file: every stream sample of a file checks against the same document. */
const document32 = (): Json => (read32 ??= parseYaml(readFileSync(join(ROOT, 'openapi-3.2.yaml'), 'utf8')) as Json)

/** A stream's items: NDJSON lines, or SSE frames as OpenAPI 3.2 sees them ({event, id, data}); comments are no item. */
function streamItems(mediaType: string, body: string): Json[] {
  if (mediaType === 'application/x-ndjson') {
    return body.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as Json)
  }
  return body.split('\n\n').filter((frame) => /^(event|data|id):/m.test(frame)).map((frame) => {
    const fields: Json = {}
    for (const [, name, value] of frame.matchAll(/^(event|id|data): ?(.*)$/gm)) fields[name!] = value
    return fields
  })
}

/**
 * Where a stream's items break the 3.2 document's itemSchema for its route, status and media type (an SSE item's `data`
 * is checked as the JSON its contentSchema describes: Ajv, like most validators, only annotates contentSchema).
 */
export function streamProblems(sample: {
  method: string
  template: string
  status: string
  mediaType: string
  body: string
}): string[] {
  const document = document32()
  const media = document['paths'][sample.template]?.[sample.method.toLowerCase()]?.responses[sample.status]
    ?.content?.[sample.mediaType]
  if (media?.itemSchema === undefined) return [`${sample.template} ${sample.status} ${sample.mediaType}: no itemSchema`]
  const ajv = new Ajv2020({ strict: false, allErrors: true }).addSchema({
    $id: 'doc', components: document['components']
  })
  const resolve = (schema: Json) =>
    JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"doc#/components/')) as Json
  const item = ajv.compile(resolve(media.itemSchema))
  const data = media.itemSchema.properties?.data?.contentSchema
  const content = data === undefined ? undefined : ajv.compile(resolve(data))
  const problems: string[] = []
  for (const event of streamItems(sample.mediaType, sample.body)) {
    if (!item(event)) problems.push(`${JSON.stringify(event).slice(0, 200)}: ${ajv.errorsText(item.errors)}`)
    if (content !== undefined && !content(JSON.parse(String(event['data'])))) {
      problems.push(`${String(event['data']).slice(0, 200)}: ${ajv.errorsText(content.errors)}`)
    }
  }
  return problems
}

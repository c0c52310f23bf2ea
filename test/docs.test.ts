import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import t from 'tap'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'
import { EnvSchema } from '#src/config.js'
import { TRANSITIONS } from '#src/runs/run-phase.js'
import { ERROR_CODES } from '#src/schemas/error.js'
import { StopReason } from '#src/schemas/run.js'
import { RunStatus } from '#src/schemas/runs.js'
import { sharedSchemas } from '#src/schemas/shared.js'
import { ROOT } from './helpers/root.js'

// The documentation is checked against the code it describes, so that moving or changing either shows the drift.

const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8')
const DOCUMENTS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).sort().map((name) => `docs/${name}`)
]

/** The text between a start marker and the first end marker after it; fails loudly when a marker is gone. */
function section(text: string, start: string, end: string): string {
  const from = text.indexOf(start)
  const to = text.indexOf(end, from + start.length)
  if (from < 0 || to < 0) throw new Error(`no section from ${JSON.stringify(start)} to ${JSON.stringify(end)}`)
  return text.slice(from, to)
}

/** The literals of a TypeBox union of literals (StopReason, RunStatus). */
const literals = (union: { anyOf: Array<{ const?: unknown }> }): string[] =>
  union.anyOf.map((member) => String(member.const))

t.test("docs/architecture.md draws a run's phases and says who moves them, " +
  'exactly as TRANSITIONS allows', async (t) => {
  const text = read('docs/architecture.md')
  const allowed = Object.entries(TRANSITIONS).flatMap(
    ([from, targets]) => targets.map((to) => `${from} → ${to}`)
  ).sort()
  const diagram = section(text, 'stateDiagram-v2', '```')
  const drawn = [...diagram.matchAll(/^ {4}([a-z_]+) --> ([a-z_]+)$/gm)].map(([, from, to]) => `${from} → ${to}`).sort()
  t.same(drawn, allowed, 'the diagram')
  const table = section(
    text, '| from | to | who | when |', '`finished`, `refused`, `failed` and `handed_over` are ends'
  )
  const rows = [
    ...table.matchAll(/^\| `([a-z_]+)` \| `([a-z_]+)` \|/gm)
  ].map(([, from, to]) => `${from} → ${to}`).sort()
  t.same(rows, allowed, 'the table of who moves a run')
})

t.test('README stays a short entry point', async (t) => {
  t.ok(statSync(join(ROOT, 'README.md')).size <= 8192, 'README.md is at most 8 KB')
})

t.test("docs/api.md's error table is the error catalog: every code with its status, and nothing else", async (t) => {
  const table = section(read('docs/api.md'), '| status | code | when |', 'Every response carries `x-request-id`')
  const documented = new Set(
    [...table.matchAll(/^\| (\d{3}) \| ([^|]+) \|/gm)].flatMap(
      ([, status, codes]) => [...codes!.matchAll(/`([A-Z_]+)`/g)].map(([, code]) => `${status} ${code}`)
    )
  )
  const catalog = new Set(
    Object.entries(ERROR_CODES).flatMap(([status, codes]) => Object.keys(codes).map((code) => `${status} ${code}`))
  )
  // Answered on any unknown route, whether or not the catalog by status lists it (no route's schema can).
  catalog.add('404 ROUTE_NOT_FOUND')
  t.same(
    [...catalog].filter((entry) => !documented.has(entry)), [], 'every code the service answers with is in docs/api.md'
  )
  t.same(
    [...documented].filter((entry) => !catalog.has(entry)), [], 'docs/api.md names no code the service does not have'
  )
})

t.test('docs/api.md names every value and schema the API has', async (t) => {
  const api = read('docs/api.md')
  const stopReasons = section(api, '`stop_reason` says why', '\n- ')
  for (const reason of literals(StopReason)) t.match(stopReasons, `\`${reason}\``, `stop_reason ${reason}`)
  const statuses = section(api, 'gives the status (', ')')
  for (const status of literals(RunStatus)) t.match(statuses, `\`${status}\``, `run status ${status}`)
  const openapi = section(api, '## OpenAPI', '\n## ')
  for (const schema of sharedSchemas(['crush_run'])) t.match(openapi, `\`${schema.$id}\``, `schema ${schema.$id}`)
  for (const [, operation] of read('openapi.yaml').matchAll(/^ {6}operationId: (\w+)$/gm)) {
    t.match(openapi, `\`${operation}\``, `operation ${operation}`)
  }
})

t.test('every variable is in docs/configuration.md with its default, once, and nothing stale', async (t) => {
  // Rows `| \`NAME\` | default | meaning |`: the default as code, `(empty)` for the empty string, `(unset)` for none.
  const rows = [
    ...read('docs/configuration.md').matchAll(/^\| `([A-Z][A-Z0-9_]+)` \| ([^|]*?) \|/gm)
  ].map(([, name, fallback]) => [name!, fallback!] as const)
  const documented = new Map(rows)
  t.equal(documented.size, rows.length, 'each variable has one row')
  for (const [variable, schema] of Object.entries(EnvSchema.properties)) {
    t.ok(documented.has(variable), `${variable} is documented`)
    const fallback = (schema as { default?: string | number | boolean }).default
    const expected = fallback === undefined ? '(unset)' : fallback === '' ? '(empty)' : `\`${String(fallback)}\``
    t.equal(documented.get(variable), expected, `${variable} default`)
  }
  t.same([...documented.keys()].filter((variable) => !(variable in EnvSchema.properties)), [], 'nothing stale')
})

t.test('docs/configuration.md lists what each agent inherits beyond AGENT_ENV_ALLOW, as its spec says', async (t) => {
  const table = section(read('docs/configuration.md'), '| agent | also inherits |', '\n\n')
  const documented = new Map(
    [...table.matchAll(/^\| (\w+) \| (`.+) \|$/gm)].map(
      ([, agent, variables]) => [agent!, [...variables!.matchAll(/`([^`]+)`/g)].map(([, name]) => name!)]
    )
  )
  t.same([...documented.keys()], BUILT_IN_AGENTS.map((spec) => spec.agent), 'one row per agent, in the catalog’s order')
  for (const spec of BUILT_IN_AGENTS) t.same(documented.get(spec.agent), spec.env, `${spec.agent}’s variables`)
})

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const found = new Set<string>()
  for (const [, heading] of withoutCode(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const text = heading!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    const base = text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').trim().replace(/\s/g, '-')
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    found.add(count === 0 ? base : `${base}-${count}`)
  }
  return found
}

/** Markdown without fenced blocks, inline code and HTML comments: what is left is what renders as text and links. */
const withoutCode = (markdown: string): string =>
  markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/<!--[\s\S]*?-->/g, '').replace(/`[^`\n]*`/g, '')

t.test('every relative link in README.md and docs/ points to a file of the ' +
  'repository (and a heading in it)', async (t) => {
  for (const document of DOCUMENTS) {
    const links = [
      ...withoutCode(read(document)).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)
    ].map(([, target]) => target!)
    for (const link of links.filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target))) {
      const [path, fragment] = link.split('#') as [string, string | undefined]
      const target = path === '' ? document : relative(ROOT, resolve(ROOT, dirname(document), decodeURIComponent(path)))
      if (target.startsWith('..')) {
        t.fail(`${document}: ${link} leaves the repository`)
        continue
      }
      if (!t.ok(existsSync(join(ROOT, target)), `${document}: ${link} exists`)) continue
      if (fragment !== undefined && target.endsWith('.md')) {
        t.ok(anchors(read(target)).has(fragment), `${document}: ${link} names a heading of ${target}`)
      }
    }
  }
})

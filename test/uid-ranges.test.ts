import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fromRoot } from './helpers/root.js'

// A service with AGENT_USERS sweeps every process of its range's uids: two test files running at once with
// overlapping ranges kill each other's agents (CI's Node 24 pass once failed so). Every range a suite gives a service
// is its own.

const SUITES = ['test', 'e2e', 'stress']

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return entry.name === 'fixtures' || entry.name === 'generated' ? [] : sources(path)
    return entry.name.endsWith('.ts') ? [path] : []
  })
}

interface UidRange { file: string; line: number; first: number; last: number }

/** The ranges given as AGENT_USERS (or a mode's `uids`), where each is written. */
function rangesIn(file: string): UidRange[] {
  return readFileSync(file, 'utf8').split('\n').flatMap((text, index) => {
    if (!/AGENT_USERS|uids/.test(text)) return []
    return [...text.matchAll(/'(\d+)-(\d+)'/g)].map((match) => ({
      file: relative(fromRoot(), file), line: index + 1, first: Number(match[1]), last: Number(match[2])
    }))
  })
}

t.test('every uid range a test gives a service is its own: no two overlap', async (t) => {
  const ranges = SUITES.flatMap((suite) => sources(fromRoot(suite))).flatMap(rangesIn)
    // token-users.test.ts parses ranges it never runs with (reversed, one number): a parse is no service.
    .filter((range) => !/parseUidRange/.test(readFileSync(fromRoot(range.file), 'utf8').split('\n')[range.line - 1]!))
  t.ok(ranges.length >= 10, `${ranges.length} ranges found`)
  const where = (range: UidRange) => `${range.file}:${range.line} (${range.first}-${range.last})`
  for (const [index, range] of ranges.entries()) {
    for (const other of ranges.slice(index + 1)) {
      t.ok(range.last < other.first || other.last < range.first, `${where(range)} and ${where(other)} are apart`)
    }
  }
})

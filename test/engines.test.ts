import t from 'tap'
import { readFileSync } from 'node:fs'
import semver from 'semver'
import { fromRoot } from './helpers/root.js'

// README names the supported Node versions; every package npm ci installs must accept each of them (no EBADENGINE).

const lock = JSON.parse(readFileSync(fromRoot('package-lock.json'), 'utf8')) as {
  packages: Record<string, { version?: string; engines?: { node?: string } }>
}
const readme = readFileSync(fromRoot('README.md'), 'utf8')

t.test('every installed package accepts every Node.js version README supports', async (t) => {
  const [, v20, v22, v24] = /Supported: Node\.js (20\.\d+)\+, (22\.\d+)\+ and (24)\b/.exec(readme)!
  const supported = [`${v20}.0`, `${v22}.0`, `${v24}.0.0`]
  t.same(supported, ['20.19.0', '22.12.0', '24.0.0'], 'the lowest release of each major that README names')
  const refusing = Object.entries(lock.packages).flatMap(([path, { engines }]) =>
    supported.filter(
      (version) => engines?.node !== undefined && !semver.satisfies(version, engines.node)
    ).map((version) => `${path} (${engines!.node}) refuses ${version}`)
  )
  t.same(refusing, [])
})

t.test('the overrides that keep Node 20 supported keep every known security fix', async (t) => {
  // @fastify/static 10.1.3 is the last release on content-disposition 2 (Node 18+) and the first with the fixes for the
  // 2026 path-traversal advisories (GHSA-83w8-p2f5-377r, GHSA-423g-23ch-w7c6, GHSA-8pvw-jcv7-9cmj).
  const versions = (name: string) =>
    Object.entries(lock.packages).filter(
      ([path]) => path.endsWith(`node_modules/${name}`)
    ).map(([, entry]) => entry.version!)
  t.ok(
    versions('@fastify/static').length > 0 &&
      versions('@fastify/static').every((version) => semver.gte(version, '10.1.3'))
  )
  t.ok(
    versions('light-my-request').every((version) => semver.satisfies(version, '^6.0.0')),
    'within the range fastify asks for'
  )
})

// The real agent CLIs the tests run, installed into the tools cache before any suite starts (`.ci/run`): on a new
// machine that is over a gigabyte from the npm registry, which must not count against one test file's timeout.
// Reads the pinned versions from the compiled test helpers (npm run build:test).
import { npmTool } from '../dist-test/test/helpers/npm-tool.js'
import { REAL_CLIS } from '../dist-test/e2e/real-cli.js'

for (const cli of Object.values(REAL_CLIS)) {
  const started = Date.now()
  const bin = await npmTool(cli.pkg, cli.version, cli.agent)
  process.stdout.write(`${cli.pkg}@${cli.version}: ${bin} (${Math.round((Date.now() - started) / 1000)} s)\n`)
}

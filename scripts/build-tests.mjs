// `npm run build:test` (and `npm test`'s pretest): what the tests run, built from scratch.
// - dist/: the service, as `npm start` runs it (tsconfig.build.json);
// - dist-test/: the tests, stress and Windows suites (tsconfig.test.json), emptied first so that a test removed from
//   test/ is never run from an old build. tsc also emits the src/ the tests' types come from; that copy is removed: the
//   tests run the service from dist/ (package.json's `#src/*`), and a second copy could only be imported by mistake.
// The two compilations run side by side: about 2 s less than one after the other on this 2-core machine.
// Nothing is compiled when nothing changed since the last build, its sources or its output (each suite's script
// builds first, and CI runs six suites in a row: 20 s each): the build leaves a stamp of every file it read and wrote.
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'

const SOURCES = ['src', 'test', 'e2e', 'stress', 'wine', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json',
  'tsconfig.test.json']
const OUTPUTS = ['dist', 'dist-test']
const STAMP = 'dist-test/.build-stamp'

/** Every file's path, size and modification time under the given paths: what a build read or wrote. */
function stamp() {
  const hash = createHash('sha256')
  const visit = (path) => {
    if (!existsSync(path) || path === STAMP) return
    const stats = statSync(path)
    if (stats.isDirectory()) {
      for (const name of readdirSync(path).sort()) visit(join(path, name))
    } else {
      hash.update(`${path}\0${stats.size}\0${stats.mtimeMs}\n`)
    }
  }
  for (const path of [...SOURCES, ...OUTPUTS]) visit(path)
  return hash.digest('hex')
}

if (existsSync(STAMP) && readFileSync(STAMP, 'utf8') === stamp()) {
  console.log('build:test: nothing changed since the last build')
  process.exit(0)
}

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
const compile = (project) => new Promise((resolve) => {
  spawn(process.execPath, [tsc, '-p', project], { stdio: 'inherit' }).on('exit', (code) => resolve(code === 0))
})

rmSync('dist-test', { recursive: true, force: true })
const built = await Promise.all([compile('tsconfig.build.json'), compile('tsconfig.test.json')])
if (built.includes(false)) process.exit(1)
rmSync('dist-test/src', { recursive: true, force: true })
writeFileSync(STAMP, stamp())

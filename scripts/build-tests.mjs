// `npm run build:test` (and `npm test`'s pretest): what the tests run, built from scratch.
// - dist/: the service, as `npm start` runs it (tsconfig.build.json);
// - dist-test/: the tests, stress and Windows suites (tsconfig.test.json), emptied first so that a test removed from
//   test/ is never run from an old build. tsc also emits the src/ the tests' types come from; that copy is removed: the
//   tests run the service from dist/ (package.json's `#src/*`), and a second copy could only be imported by mistake.
// The two compilations run side by side: about 2 s less than one after the other on this 2-core machine.
import { spawn } from 'node:child_process'
import { rmSync } from 'node:fs'
import { createRequire } from 'node:module'

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
const compile = (project) => new Promise((resolve) => {
  spawn(process.execPath, [tsc, '-p', project], { stdio: 'inherit' }).on('exit', (code) => resolve(code === 0))
})

rmSync('dist-test', { recursive: true, force: true })
const built = await Promise.all([compile('tsconfig.build.json'), compile('tsconfig.test.json')])
if (built.includes(false)) process.exit(1)
rmSync('dist-test/src', { recursive: true, force: true })

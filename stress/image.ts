import t from 'tap'
import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { cpSync, existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { ROOT, tempDir } from '../test/helpers/index.js'

// No Docker daemon runs on these machines: this replays what the Dockerfile's runtime stage does — the compiled
// service, production dependencies only, the image's own command and health check — and checks that it serves.
const run = promisify(execFile)

interface Stage {
  env: Record<string, string>
  run: string[]
  user: string | undefined
  cmd: string[]
  entrypoint: string[]
  healthcheck: string[]
  /** What it copies from the build context: its sources, then where to (`COPY --from` is the build stage's). */
  copy: string[][]
}

/** The last stage of the Dockerfile, continuation lines joined. */
function runtimeStage(dockerfile: string): Stage {
  const instructions = dockerfile.replace(/\\\n\s*/g, '').split('\n').filter(
    (line) => line.trim() !== '' && !line.startsWith('#')
  )
  const last = instructions.map((line) => line.startsWith('FROM ')).lastIndexOf(true)
  const stage: Stage = { env: {}, run: [], user: undefined, cmd: [], entrypoint: [], healthcheck: [], copy: [] }
  for (const line of instructions.slice(last + 1)) {
    const [keyword, ...rest] = line.split(' ')
    const argument = rest.join(' ')
    if (keyword === 'ENV') for (const [, key, value] of argument.matchAll(/(\w+)=(\S+)/g)) stage.env[key!] = value!
    if (keyword === 'RUN') stage.run.push(argument)
    if (keyword === 'COPY' && !argument.startsWith('--from')) stage.copy.push(rest)
    if (keyword === 'USER') stage.user = argument
    if (keyword === 'CMD') stage.cmd = JSON.parse(argument)
    if (keyword === 'ENTRYPOINT') stage.entrypoint = JSON.parse(argument)
    if (keyword === 'HEALTHCHECK') stage.healthcheck = JSON.parse(argument.slice(argument.indexOf('CMD ') + 4))
  }
  return stage
}

const stage = runtimeStage(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))

t.test('the runtime stage: production dependencies only, a non-root user, HOST=0.0.0.0, both agent CLIs', async (t) => {
  t.ok(stage.run.some((command) => command.includes('npm ci --omit=dev')))
  t.ok(stage.user !== undefined && stage.user !== 'root' && stage.user !== '0', `runs as ${stage.user}`)
  t.equal(stage.env['HOST'], '0.0.0.0')
  t.ok(
    stage.run.some((command) => command.includes('@anthropic-ai/claude-code') && command.includes('@charmland/crush'))
  )
  t.same(stage.cmd.slice(0, 1), ['node'])
  t.same(stage.entrypoint, ['/usr/bin/tini', '--'], 'an init that reaps orphans as PID 1')
  t.ok(stage.run.some((command) => /apt-get install .*\btini\b/.test(command)))
  t.ok(stage.healthcheck.length > 0, 'a HEALTHCHECK')
  const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
  for (const entry of ['node_modules', '.env', '.git']) {
    t.match(ignored, new RegExp(`^${entry.replace('.', '\\.')}$`, 'm'))
  }
})

t.test('built and installed as the image is, ' +
  'the service starts with its command and answers its health check', async (t) => {
  const app = join(tempDir(t), 'app')
  // Build stage: the compiler over src/, into the directory the runtime stage copies.
  await run(process.execPath, [
    join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json'), '--outDir',
    join(app, 'dist')
  ])
  // The package files and the console's (console/), from the context, where the stage puts them.
  for (const copied of stage.copy) {
    const destination = copied.at(-1)!
    for (const source of copied.slice(0, -1)) {
      cpSync(
        join(ROOT, source), join(app, destination.endsWith('/') ? join(destination, source) : destination),
        { recursive: true }
      )
    }
  }
  const install = stage.run.find((command) => command.includes('npm ci --omit=dev'))!.split('&&')[0]!.trim().split(' ')
  await run('npm', install.slice(1), { cwd: app, env: { ...process.env, NODE_ENV: 'production' } })
  for (const devOnly of ['typescript', 'tap', '@anthropic-ai/claude-code']) {
    t.notOk(existsSync(join(app, 'node_modules', devOnly)), `${devOnly} is not in the image`)
  }

  const env = { PATH: process.env['PATH'], HOME: app, ...stage.env, PORT: '0', DATA_DIR: join(app, 'data') }
  // The image's ENTRYPOINT and CMD together, tini first, as the container runs them.
  const [command, ...args] = [...stage.entrypoint, ...stage.cmd]
  const refused = spawn(command!, args, { cwd: app, env, stdio: ['ignore', 'ignore', 'pipe'] })
  let refusal = ''
  refused.stderr.on('data', (chunk) => (refusal += chunk))
  t.equal((await once(refused, 'exit'))[0], 1, 'without API_TOKENS the image refuses to listen on 0.0.0.0')
  t.match(refusal, /API_TOKENS/)

  const server = spawn(command!, args, {
    cwd: app, env: { ...env, API_TOKENS: 'image-test' }, stdio: ['ignore', 'pipe', 'inherit']
  })
  t.teardown(() => server.kill('SIGKILL'))
  const port = await new Promise<string>((resolve, reject) => {
    let seen = ''
    server.stdout.on('data', (chunk) => {
      seen += chunk
      const listening = /Server listening at http:\/\/[^:]+:(\d+)/.exec(seen)
      if (listening) resolve(listening[1]!)
    })
    server.once('exit', (code) => reject(new Error(`the service exited with ${code}: ${seen}`)))
  })
  const health = await fetch(`http://127.0.0.1:${port}/healthz`)
  t.equal(health.status, 200)
  t.same(await health.json(), { status: 'ok' })

  const check = spawn(stage.healthcheck[0]!, stage.healthcheck.slice(1), {
    env: { ...env, PORT: port }, stdio: 'ignore'
  })
  t.equal((await once(check, 'exit'))[0], 0, "the image's HEALTHCHECK passes")
  server.kill('SIGTERM')
  t.equal((await once(server, 'exit'))[0], 0, 'and stops cleanly')
})

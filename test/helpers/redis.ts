import type { Test } from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { connect, createServer, type AddressInfo } from 'node:net'

// A real redis-server on a port of its own. `.ci/run` installs it where it is missing; elsewhere the tests that need it
// say why they are skipped.
const REDIS_SERVER = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim()
export const NO_REDIS = REDIS_SERVER === '' && 'redis-server is not installed (apt-get install redis-server)'

export async function freePort(): Promise<number> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  server.close()
  return port
}

/**
 * A redis-server of the test's own, killed when it ends. On a free port unless one is given; a port another file took
 * between freePort() and redis-server's bind is given up for another (files run side by side). With `dir`, it keeps
 * its data there as production Redis does (an append-only file written at every command), so that one started again
 * on the same `dir` has it back.
 */
export async function startRedis(t: Test, port?: number, dir?: string): Promise<{
  url: string
  port: number
  stop: () => Promise<void>
}> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRedisOn(t, port ?? (await freePort()), dir)
    } catch (error) {
      if (port !== undefined || attempt === 3) throw error
    }
  }
}

async function startRedisOn(
  t: Test, port: number, dir: string | undefined
): Promise<{ url: string; port: number; stop: () => Promise<void> }> {
  const kept = dir === undefined
    ? ['--appendonly', 'no']
    : ['--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always']
  const redis = spawn(
    REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', ...kept],
    { stdio: ['ignore', 'pipe', 'inherit'] }
  )
  let seen = ''
  await new Promise<void>((resolve, reject) => {
    redis.stdout.on('data', (chunk) => {
      seen += chunk
      if (seen.includes('Ready to accept connections')) resolve()
    })
    redis.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${seen}`)))
  })
  const stop = async () => {
    if (redis.exitCode !== null || redis.signalCode !== null) return
    redis.kill('SIGKILL')
    await once(redis, 'exit')
  }
  t.teardown(stop)
  return { url: `redis://127.0.0.1:${port}`, port, stop }
}

let prefixes = 0

/** A fleet's settings: slots (and so runs) in this Redis, under a prefix of this test's own. */
export const redisEnv = (url: string, extra: Record<string, string> = {}) => ({
  SLOTS_BACKEND: 'redis',
  REDIS_URL: url,
  SLOTS_KEY_PREFIX: `test-${process.pid}-${++prefixes}:`,
  // The tests' own Redis shares a loaded machine with two test files at once: a command has seen over a second there.
  REDIS_TIMEOUT_MS: '5000',
  ...extra
})

/**
 * A way to Redis whose answers, on the connections made in its first `slowForMs`, arrive `delayMs` late: a Redis (or a
 * replica's machine) busy as the service starts.
 */
export async function slowAtFirst(t: Test, redisUrl: string, slowForMs: number, delayMs: number): Promise<string> {
  const target = new URL(redisUrl)
  const slowUntil = Date.now() + slowForMs
  const proxy = createServer((client) => {
    const slow = Date.now() < slowUntil
    const server = connect(Number(target.port), target.hostname)
    client.on('error', () => server.destroy())
    server.on('error', () => client.destroy())
    client.pipe(server)
    if (!slow) server.pipe(client)
    else server.on('data', (chunk: Buffer) => setTimeout(() => client.writable && client.write(chunk), delayMs))
  })
  proxy.listen(0, '127.0.0.1')
  await once(proxy, 'listening')
  t.teardown(() => proxy.close())
  return `redis://127.0.0.1:${(proxy.address() as AddressInfo).port}`
}

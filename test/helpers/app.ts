import type { FastifyInstance } from 'fastify'
import { spawn, type ChildProcess, type ChildProcessByStdio } from 'node:child_process'
import { once } from 'node:events'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { Writable, type Readable } from 'node:stream'
import { DEFAULT_AGENT_ENV_ALLOW } from '#src/agents/environment.js'
import { loggerOptions } from '#src/http/app.js'
import { buildApp } from '#src/service/app.js'
import { loadConfig, type Config } from '#src/config.js'
import { fromRoot } from './root.js'

export const FIXTURE_BIN = fromRoot('test/fixtures/bin')

/** The environment agents get in tests: the stand-ins first on PATH, so the default binary names find them. */
export function standInEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  // tap's NODE_OPTIONS load its TypeScript and coverage hooks: the stand-ins are plain Node scripts and run without.
  const { NODE_OPTIONS: _tapHooks, ...inherited } = process.env
  // The gemini, codex and opencode stand-ins, like the real ones, want credentials before they do anything.
  const keys = { GEMINI_API_KEY: 'stand-in', OPENAI_API_KEY: 'stand-in' }
  return { ...inherited, PATH: `${FIXTURE_BIN}:${process.env['PATH'] ?? ''}`, ...keys, ...extra }
}

/** The stand-ins' own knobs pass the agent environment rule, as a provider key would. */
export const TEST_AGENT_ENV_ALLOW = [
  ...DEFAULT_AGENT_ENV_ALLOW, 'STAND_IN_LOG', 'SUDO_STAND_IN_LOG', 'WSL_STAND_IN_*'
].join(',')

/** A directory of this test's own, removed when it ends: test files run in parallel and never share one. */
export function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'agent-runner-test-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** DATA_DIR where the tokens' users (AGENT_USERS) can reach their homes: its parent crossable (a temp dir is 0700). */
export function crossableDataDir(t: Test): string {
  const parent = tempDir(t)
  chmodSync(parent, 0o711)
  return join(parent, 'data')
}

/** A directory every user may write in, as /tmp (sticky): where agents of several users leave files for a test. */
export function sharedDir(t: Test): string {
  const dir = tempDir(t)
  chmodSync(dir, 0o1777)
  return dir
}

/**
 * Tests that follow an agent's processes by the pids they write run in process-group mode, where those pids are the
 * host's; test/process/containment.test.ts covers every mode by scanning /proc instead.
 */
export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig({
    LOG_LEVEL: 'silent',
    AGENT_KILL_GRACE_MS: '200',
    AGENT_ENV_ALLOW: TEST_AGENT_ENV_ALLOW,
    AGENT_CONTAINMENT: 'process-group',
    // Most tests' tokens trust each other (one user for all their agents); test/tenants/ gives each its own.
    ALLOW_SHARED_AGENT_USER: 'true',
    DATA_DIR: overrides['DATA_DIR'] ?? mkdtempSync(join(tmpdir(), 'agent-runner-data-')),
    AGENT_WORKDIR: overrides['AGENT_WORKDIR'] ?? mkdtempSync(join(tmpdir(), 'agent-runner-work-')),
    ...overrides
  })
}

/** A data directory and an agents' working directory of the test's own: files running side by side share neither. */
const ownDirectories = (t: Test) => {
  const dir = tempDir(t)
  return { DATA_DIR: join(dir, 'data'), AGENT_WORKDIR: join(dir, 'workspace') }
}

/** The service in this process (coverage sees it), closed when the test ends. */
export async function build(
  t: Test,
  overrides: Record<string, string> = {},
  agentEnv: NodeJS.ProcessEnv = standInEnv()
): Promise<FastifyInstance> {
  const app = await buildApp(testConfig({ ...ownDirectories(t), ...overrides }), { logger: false, agentEnv })
  t.teardown(() => app.close())
  return app
}

/**
 * The service in this process as `build` makes it, logging with its own settings (at `info` unless told otherwise)
 * into `lines`, one JSON line each: for a test that reads what the service said it did.
 */
export async function buildLogged(
  t: Test,
  overrides: Record<string, string> = {},
  agentEnv: NodeJS.ProcessEnv = standInEnv()
): Promise<{ app: FastifyInstance; lines: string[] }> {
  const lines: string[] = []
  const stream = new Writable({
    write: (chunk: Buffer, _encoding, done) => {
      lines.push(chunk.toString())
      done()
    }
  })
  const config = testConfig({ LOG_LEVEL: 'info', ...ownDirectories(t), ...overrides })
  const app = await buildApp(config, { logger: { ...(loggerOptions(config) as object), stream }, agentEnv })
  t.teardown(() => app.close())
  return { app, lines }
}

/** A real listening server on a free loopback port (port 0: files running in parallel never share one). */
export async function listen(t: Test, app: FastifyInstance): Promise<string> {
  const address = await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(() => app.close())
  return address
}

// The compiled entry point, as `npm start` runs it (npm test builds first).
export const SERVER = fromRoot('dist/server.js')

export interface Started {
  child: ChildProcess
  /** Where it listens; empty for a fleet's worker, which does not. */
  base: string
  logs: Array<Record<string, unknown>>
}

/** How long a test's service may take to close at SIGTERM before it is killed. */
const SERVER_CLOSE_MS = 5000

export interface ServerOptions {
  cwd?: string
  /** Run it as that account (the test is root), whose directories it must then be given. */
  user?: { uid: number; gid: number }
  /**
   * Without tap's process tracking: tap adds its loader to NODE_OPTIONS at every spawn, down to the agents, and a real
   * CLI written in Node (gemini) then fails writing tap's records as another user. No coverage from such a service.
   */
  untraced?: boolean
  /**
   * A descriptor it starts with as its fd 200, as a shell's `200>file` would leave it (Node itself closes low ones to
   * its children, not those).
   */
  inherit?: number
}

/** The service as its own process (`node dist/server.js`), on a free port, stopped when the test ends. */
export async function startServer(t: Test, env: NodeJS.ProcessEnv, options: ServerOptions = {}): Promise<Started> {
  const { cwd, user, untraced = false, inherit } = options
  const extra = inherit === undefined ? [] : [...Array<'ignore'>(197).fill('ignore'), inherit]
  const defaults = {
    PORT: '0', AGENT_CONTAINMENT: 'process-group', ALLOW_SHARED_AGENT_USER: 'true', ...ownDirectories(t)
  }
  const asUser = user === undefined
    ? []
    : ['setpriv', '--reuid', String(user.uid), '--regid', String(user.gid), '--init-groups', '--']
  const [file, ...args] = [...(untraced ? ['env', '-u', 'NODE_OPTIONS'] : []), ...asUser, process.execPath, SERVER]
  const child = spawn(file, args, {
    env: standInEnv({ ...defaults, ...env }), cwd, stdio: ['ignore', 'pipe', 'pipe', ...extra]
  }) as ChildProcessByStdio<null, Readable, Readable>
  // SIGTERM first, as a service manager does: the service closes and ends what it started (agents, --version probes).
  // A SIGKILL straight away left those probes running with no parent.
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = once(child, 'exit')
    child.kill('SIGTERM')
    const killer = setTimeout(() => child.kill('SIGKILL'), SERVER_CLOSE_MS)
    await exited
    clearTimeout(killer)
  })
  const logs: Array<Record<string, unknown>> = []
  let pending = ''
  const base = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      pending += chunk.toString()
      const lines = pending.split('\n')
      pending = lines.pop()!
      for (const line of lines) {
        const entry = JSON.parse(line)
        logs.push(entry)
        const listening = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(entry.msg)
        if (listening) resolve(listening[1]!)
        // A fleet's worker listens to nothing: it is there once it says it is ready.
        else if (env['ROLE'] === 'worker' && String(entry.msg).startsWith('agent-runner ready')) resolve('')
      }
    })
    // Read, so that a chatty stderr can never fill its pipe and block the service.
    child.stderr.resume()
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)))
  })
  return { child, base, logs }
}

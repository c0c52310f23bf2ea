// The service's cost over the real thing: the real Claude Code, offline against the scripted Anthropic server of the
// end-to-end suite, run bare (spawned as the service would, same argv and environment) and through POST
// /tools/claude_run, alternately, in both containment modes. Needs `npm run build:test` (the scripted server is
// test code) and the CLI, installed into the tools cache by the suite (npm run test:agents) or here.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'

const ROOT = new URL('..', import.meta.url).pathname
const { startAnthropicServer } = await import(`${ROOT}dist-test/test/helpers/model-servers/anthropic.js`)
const { claudeOffline, realClaude } = await import(`${ROOT}dist-test/test/helpers/real-clis/claude.js`)

const SCRIPT = [{ run: 'echo bench-tool' }, { say: 'bench done' }]
const TASK = 'bench'

/** The argv the service gives claude for a JSON answer (src/agents/claude.ts). */
const argvOf = (task) => ['-p', '--output-format', 'json', '--permission-mode', 'bypassPermissions', '--', task]

function runBare(bin, env, cwd) {
  const started = performance.now()
  const child = spawn(bin, argvOf(TASK), { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] })
  child.stdout.resume()
  child.stderr.resume()
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`bare claude exited ${code}`))))
  })
}

async function runThroughService(base, cwd) {
  const started = performance.now()
  const response = await fetch(`${base}/tools/claude_run`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task: TASK, cwd })
  })
  const result = await response.json()
  if (!result.ok) throw new Error(`claude through the service: ${JSON.stringify(result).slice(0, 500)}`)
  return performance.now() - started
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

/**
 * `rounds` pairs, bare then service, for one containment mode. As root the bare run and the service's agent are both
 * root, which claude accepts for bypassPermissions only with IS_SANDBOX=1: the same variable for both.
 */
export async function realClaudeOverhead(startService, containment, rounds) {
  const bin = await realClaude()
  const model = await startAnthropicServer(SCRIPT)
  const home = mkdtempSync(join(tmpdir(), 'agent-runner-bench-home-'))
  const cwd = mkdtempSync(join(tmpdir(), 'agent-runner-bench-cwd-'))
  const env = { PATH: process.env.PATH, LANG: 'C.UTF-8', HOME: home, IS_SANDBOX: '1', ...claudeOffline(home, model.url) }
  const service = await startService({ ...env, CLAUDE_BIN: bin, AGENT_CONTAINMENT: containment, AGENT_WORKDIR: cwd })
  try {
    // One of each first, unmeasured: claude's first run in a HOME writes its state there.
    await runBare(bin, env, cwd)
    await runThroughService(service.base, cwd)
    const bare = []
    const through = []
    for (let round = 0; round < rounds; round++) {
      bare.push(await runBare(bin, env, cwd))
      through.push(await runThroughService(service.base, cwd))
    }
    return { bareMs: median(bare), serviceMs: median(through), ratio: median(through) / median(bare), addedMs: median(through) - median(bare) }
  } finally {
    await service.stop()
    await model.close()
    rmSync(home, { recursive: true, force: true })
    rmSync(cwd, { recursive: true, force: true })
  }
}

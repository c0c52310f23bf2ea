import type { Test } from 'tap'
import { dirname } from 'node:path'
import { runTool } from './api.js'
import { build, tempDir } from './app.js'
import { npmTool } from './npm-tool.js'
import { processesLeft } from './processes.js'

/** No key, no login, a fresh HOME: what a real agent CLI does here with nothing to authenticate with. */
export const credentialFree = (home: string): NodeJS.ProcessEnv =>
  ({ HOME: home, PATH: process.env['PATH'], LANG: 'C.UTF-8' })

/**
 * A real agent CLI that retries the network forever here, run with a task that would end it at once if read as its
 * option (`--version`): it must be stopped at its deadline, with nothing of it left running.
 */
export async function stoppedAtDeadline(
  t: Test, agent: { name: 'codex' | 'opencode'; pkg: string; version: string; printsVersion: RegExp }
): Promise<void> {
  const bin = await npmTool(agent.pkg, agent.version, agent.name)
  const variable = `${agent.name.toUpperCase()}_BIN`
  const app = await build(t, { [variable]: bin, AGENT_KILL_GRACE_MS: '500' }, credentialFree(tempDir(t)))
  const result = await runTool(app, `${agent.name}_run`, { task: '--version', timeout: 3 })
  t.match(
    result, { tool: `${agent.name}_run`, ok: false, timed_out: true, stop_reason: 'timeout' },
    'it never ended by itself: it was stopped'
  )
  t.notMatch(result.output, agent.printsVersion, 'the task was not read as --version')
  t.same(await processesLeft(dirname(dirname(bin))), [], `no ${agent.name} process left`)
}

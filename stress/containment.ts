import t from 'tap'
import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { existsSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { chooseHostContainment } from '#src/process/host-containment.js'
import {
  build, listen, processesMatching, scenario, startServer, tempDir, until, waitFor
} from '../test/helpers/index.js'

// The service's own death, and clients that leave before their agent starts.

const namespaceAvailable = (await chooseHostContainment('auto')).containment.mode === 'pid-namespace'
const started = (dir: string) => existsSync(join(dir, 'daemon')) && existsSync(join(dir, 'double'))
const postJson = (base: string, path: string, body: unknown) =>
  fetch(`${base}${path}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body)
  })

t.test('kill -KILL of the service: its agents, daemons included, ' +
  'are gone within 5 s', { skip: !namespaceAvailable && 'no PID namespaces here' }, async (t) => {
  const dirs = [tempDir(t), tempDir(t)]
  const { child, base } = await startServer(t, { AGENT_CONTAINMENT: 'pid-namespace' })
  // One synchronous run and one async run, each with a daemon and a double-forked grandchild.
  void postJson(base, '/tools/crush_run', { task: scenario.daemons(dirs[0]!, 600000) }).catch(() => {})
  await postJson(base, '/runs', { tool: 'crush_run', task: scenario.daemons(dirs[1]!, 600000) })
  await waitFor(() => dirs.every(started), 10_000, 'the agents and their daemons')
  const exited = once(child, 'exit')
  child.kill('SIGKILL')
  await exited
  const left = await until(
    () => dirs.flatMap((dir) => processesMatching(dir)), (lines) => lines.length === 0, 5000,
    'every process of both runs to die'
  )
  t.same(left, [], 'nothing of either run is left')
})

t.test('restart after kill -KILL: what the previous life left is stopped and reported', async (t) => {
  const dir = tempDir(t)
  const dataDir = tempDir(t)
  t.teardown(() => {
    try {
      execFileSync('pkill', ['-KILL', '-f', dir])
    } catch {
      // nothing was left
    }
  })
  // Process-group mode: nothing ends the agents with the service, so the next life must find them.
  const env = { AGENT_CONTAINMENT: 'process-group', DATA_DIR: dataDir, LOG_LEVEL: 'info' }
  const first = await startServer(t, env)
  await postJson(first.base, '/runs', { tool: 'crush_run', task: scenario.daemons(dir, 600000) })
  await waitFor(() => started(dir), 10_000, 'the agent and its daemons')
  const exited = once(first.child, 'exit')
  first.child.kill('SIGKILL')
  await exited
  const survivors = processesMatching(dir)
  t.ok(survivors.some((line) => line.includes('@daemons')), 'the agent outlived the killed service')

  const second = await startServer(t, env)
  const report = second.logs.find((entry) => String(entry['msg']).includes('previous life'))
  t.match(report, {
    level: 40, leftovers: [{ runId: /^[0-9a-f-]{36}$/, record: { kind: 'host-group' }, stopped: true }]
  })
  await waitFor(
    () => !processesMatching(dir).some((line) => line.includes('@daemons') || line.includes('"$0/double"')), 5000,
    'the group to die'
  )
  t.same(
    processesMatching(dir).filter((line) => !line.includes('"$0/daemon"')), [],
    'the agent and its group are gone; only the daemon that left the group could escape'
  )
})

t.test('50 clients leaving right after their body: no agent left, every slot back', async (t) => {
  const dir = tempDir(t)
  const app = await build(t, {
    MAX_CRUSH_AGENTS: '50', AGENT_CONTAINMENT: namespaceAvailable ? 'pid-namespace' : 'process-group'
  })
  const base = new URL(await listen(t, app))
  await Promise.all(
    Array.from({ length: 50 }, async (_unused, index) => {
      const body = JSON.stringify({ task: scenario.sleep(600000, `${dir}/${index}`) })
      const socket = connect(Number(base.port), base.hostname)
      await once(socket, 'connect')
      socket.on('error', () => {})
      const head = `POST /tools/crush_run HTTP/1.1\r\nHost: ${base.host}\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\n\r\n`
      // Once the whole body is with the kernel, leave at moments spread over the reserve window (0–9 ms).
      await new Promise<void>((resolve) => socket.write(head + body, () => resolve()))
      await new Promise((resolve) => setTimeout(resolve, index % 10))
      socket.destroy()
    })
  )
  const after = await until(
    () => ({ slots: app.slots.inUse('crush_run'), agents: processesMatching(dir) }),
    (state) => state.slots === 0 && state.agents.length === 0, 10_000, 'slots back, no agent'
  )
  t.same(after, { slots: 0, agents: [] }, 'every slot back, no agent left')
})

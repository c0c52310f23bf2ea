import t from 'tap'
import { existsSync } from 'node:fs'
import { cgroupLayout, eventCount, hostCgroups, removeCgroups } from '#src/process/run-cgroups.js'
import {
  build, heldAgent, isAlive, processesMatching, readPidFile, runTool, scenario, tempDir
} from '../helpers/index.js'
import { asRoot } from '../helpers/users.js'

// Limits per run (issue 36, item 4): each run in a cgroup of its own, its processes and memory bounded, a run crossing
// a limit stopped with the limit as its stop_reason, the service and other runs answering meanwhile.

const V1_MOUNTS = [
  '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
  '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
  '39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids',
  '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw'
].join('\n')

t.test('where runs’ cgroups go: v1 under the service’s own per controller, ' +
  'v2 only where its cgroup delegates', async (t) => {
  const self = '8:pids:/\n4:memory:/box/7\n1:cpu:/\n0::/'
  t.same(cgroupLayout(V1_MOUNTS, self, () => undefined, 'svc'), {
    version: 1,
    parents: {
      pids: '/sys/fs/cgroup/pids/svc', memory: '/sys/fs/cgroup/memory/box/7/svc', cpu: '/sys/fs/cgroup/cpu/svc'
    }
  })
  const v2 = '30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw'
  t.same(cgroupLayout(v2, '0::/system.slice/ar.service', () => 'cpu memory pids', 'svc'), {
    version: 2,
    parents: {
      pids: '/sys/fs/cgroup/system.slice/ar.service/svc',
      memory: '/sys/fs/cgroup/system.slice/ar.service/svc',
      cpu: '/sys/fs/cgroup/system.slice/ar.service/svc'
    }
  })
  t.match(cgroupLayout(v2, '0::/user.slice', () => 'cpu', 'svc'), /does not hand pids and memory to its children/)
  t.match(cgroupLayout('', '', () => undefined, 'svc'), /no pids and memory cgroup controllers/)
  t.equal(eventCount('max 3\n', 'max'), 3)
  t.equal(eventCount('oom_kill_disable 0\nunder_oom 0\noom_kill 2\n', 'oom_kill'), 2)
  t.equal(eventCount('', 'max'), 0)
})

const probe = asRoot
  ? await hostCgroups(`probe-${String(process.pid)}`, { processes: 64, memoryBytes: 1 << 30 })
  : { reason: 'not root' }
if ('layout' in probe) removeCgroups(probe.layout)
const cgroupsHere = 'layout' in probe
const skip = !cgroupsHere && 'no cgroups this service may make here (root, Linux, pids and memory controllers)'

t.test('a fork bomb in one run: stopped at its process limit, ' +
  'while another token’s run and /healthz answer', { skip }, async (t) => {
  const app = await build(t, {
    API_TOKENS: 'alice:secret-a,bob:secret-b', AGENT_MAX_PROCESSES: '64', MAX_CRUSH_AGENTS: '4'
  })
  t.match(
    (await app.inject({
      method: 'GET', url: '/readyz', headers: { authorization: 'Bearer secret-a' }
    })).json().containment,
    { limits: /^64 processes and 3072 MiB of memory per run.*\(cgroup v[12]\)$/ }
  )
  const dir = tempDir(t)
  const bomb = runTool(app, 'crush_run', { task: scenario.forkBomb(dir), timeout: 20 }, {
    authorization: 'Bearer secret-a'
  })
  while (!existsSync(`${dir}/bomb`)) await new Promise((resolve) => setImmediate(resolve))
  const other = await runTool(app, 'crush_run', { task: scenario.sleep(1) }, { authorization: 'Bearer secret-b' })
  t.match(other, { ok: true, output: /slept 1/ }, 'bob’s run ran as usual beside it')
  t.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, '/healthz answered')
  const result = await bomb
  t.match(result, { ok: false, stop_reason: 'process_limit', timed_out: false }, 'the bomb’s run ended on its limit')
})

t.test('an allocation past the memory limit: the run stops on it, saying so', { skip }, async (t) => {
  const app = await build(t, { AGENT_MAX_MEMORY_MB: '128' })
  const result = await runTool(app, 'crush_run', { task: scenario.allocate(400), timeout: 20 })
  t.match(result, { ok: false, stop_reason: 'memory_limit', timed_out: false })
})

t.test('a tool’s own limits over the service’s: crush at 128 MiB stops at 200, ' +
  'claude beside it does not', { skip }, async (t) => {
  const app = await build(t, { CRUSH_MAX_MEMORY_MB: '128' })
  t.match(
    await runTool(app, 'crush_run', { task: scenario.allocate(200), timeout: 20 }),
    { ok: false, stop_reason: 'memory_limit' }, 'crush: its own limit'
  )
  t.match(
    await runTool(app, 'claude_run', { task: scenario.allocate(200), timeout: 5 }), { stop_reason: 'timeout' },
    'claude: the service’s, which 200 MiB does not reach'
  )
})

t.test('a normal agent is untouched by the default limits', { skip }, async (t) => {
  const app = await build(t)
  t.match(
    await runTool(app, 'claude_run', { task: scenario.allocate(200), timeout: 5 }), { stop_reason: 'timeout' },
    '200 MiB is no limit’s business: its deadline ends it'
  )
})

t.test('with a cgroup per run, nothing escapes process-group mode: a setsid env -i daemon ends with its run, ' +
  'not another run', { skip }, async (t) => {
  const app = await build(t, { AGENT_CONTAINMENT: 'process-group', MAX_CRUSH_AGENTS: '4' })
  t.match((await app.inject({ method: 'GET', url: '/readyz' })).json().containment, {
    mode: 'process-group', escapes: /^nothing: every process left in the run's cgroup ends with it$/
  })
  const held = heldAgent(t)
  const holding = runTool(app, 'crush_run', { task: held.task })
  const heldPid = await readPidFile(held.pidFile)
  const dir = tempDir(t)
  t.match(await runTool(app, 'crush_run', { task: scenario.scrubbed(dir, 0) }), {
    ok: true, output: 'scrubbed daemon started\n'
  })
  t.same(processesMatching(dir).filter((line) => line.includes('"$0/scrubbed"')), [], 'the daemon ended with its run')
  t.ok(isAlive(heldPid), 'the other run’s agent did not')
  held.release()
  t.match(await holding, { ok: true })
})

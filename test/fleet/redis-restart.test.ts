import t, { type Test } from 'tap'
import { join } from 'node:path'
import {
  call, cancelRun, createRun, getRun, isAlive, readPidFile, scenario, settled, startServer, tempDir,
  TEST_AGENT_ENV_ALLOW, until
} from '../helpers/index.js'
import { NO_REDIS, redisEnv, startRedis } from '../helpers/redis.js'
import { inUse, NO_AGENT_HERE } from './fleet-hosts.js'

// The fleet's Redis restarted while a run waits its turn (issue 40): every connection drops and comes back. What is
// promised then (docs/operations.md), with its data kept (production Redis, BullMQ's own requirement).

const ALICE = { authorization: 'Bearer alice-secret' }

t.test('the fleet’s Redis restarted while a run waits its turn', { skip: NO_REDIS }, async (t) => {
  const dir = tempDir(t)
  let redis = await startRedis(t, undefined, dir)
  const env = redisEnv(redis.url, {
    API_TOKENS: 'alice:alice-secret', MAX_CRUSH_AGENTS: '1', SLOTS_TTL_MS: '3000', AGENT_ENV_ALLOW: TEST_AGENT_ENV_ALLOW
  })
  const [api] = await Promise.all([
    startServer(t, { ...env, ...NO_AGENT_HERE, ROLE: 'api' }),
    startServer(t, { ...env, ROLE: 'worker' })
  ])

  /** One run holding the fleet's only slot on the worker, one waiting its turn on the API replica. */
  async function oneRunningOneWaiting(t: Test, name: string) {
    const pidFile = join(dir, `${name}.pid`)
    const running = await createRun(api.base, { tool: 'crush_run', task: scenario.drip(100000, 50, pidFile) }, ALICE)
    const pid = await readPidFile(pidFile)
    const waiting = await createRun(
      api.base, { tool: 'crush_run', task: `${name}: my turn`, queue_timeout: 120 }, ALICE
    )
    t.match(waiting, { status: 'queued', queue_position: 1 })
    return { running, pid, waiting }
  }

  async function restart(): Promise<void> {
    await redis.stop()
    redis = await startRedis(t, redis.port, dir)
    await until(() => call(api.base, 'GET', '/readyz', { headers: ALICE }), ({ status }) => status === 200, 30_000,
      'the API replica ready again')
  }

  t.test('its data kept: the running run goes on and is reached by DELETE, the waiting one keeps its turn',
    async (t) => {
      const { running, pid, waiting } = await oneRunningOneWaiting(t, 'kept')
      await restart()
      t.ok(isAlive(pid), 'the running agent went on')
      t.match(await getRun(api.base, waiting.id, ALICE), { status: 'queued', queue_position: 1 }, 'still waiting')
      t.match(await cancelRun(api.base, running.id, ALICE), { status: 'cancelled' }, 'DELETE still reaches its worker')
      await until(() => isAlive(pid), (alive) => !alive, 10_000, 'the cancelled agent to be gone')
      t.match(await settled(api.base, waiting.id, 30_000, ALICE), { status: 'succeeded' }, 'then the waiting one ran')
      t.equal(await inUse(api.base, 'crush_run', ALICE), 0, 'no slot left held')
    })
})

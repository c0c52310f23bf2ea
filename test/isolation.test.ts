import t from 'tap'
import { whatAgentsCanReach } from '#src/isolation.js'
import { testConfig } from './helpers/index.js'

// What /readyz and the start log say agents can reach, setup by setup (test/process/agent-user.test.ts shows an agent
// meeting it for real).

const TOKENS = { API_TOKENS: 'studio:s3cret' }
const redis = { SLOTS_BACKEND: 'redis', REDIS_URL: 'redis://127.0.0.1:1' }

t.test('without AGENT_USER: the secrets by the way they can be read, the store, ' +
  'and the service without tokens', async (t) => {
  t.match(whatAgentsCanReach(testConfig(TOKENS), 'process-group'), [
    /^the service's secrets: the service's environment \(\/proc\/<pid>\/environ\), its \.env, if any$/,
    /^every caller's runs in /
  ])
  t.match(
    whatAgentsCanReach(testConfig(TOKENS), 'pid-namespace'),
    [/^the service's secrets: its \.env, if any$/, /every caller's runs/],
    'a namespace\'s own /proc hides the environment, not the files'
  )
  t.match(
    whatAgentsCanReach(testConfig({ ...TOKENS, RUNS_STORE: 'memory' }), 'pid-namespace'), [/^the service's secrets/],
    'no store on disk: nothing of it to read'
  )
  t.match(whatAgentsCanReach(testConfig({ RUNS_STORE: 'memory' }), 'process-group'), [
    /^the service itself: without API_TOKENS any local process, agents included, may call it$/
  ])
  t.match(whatAgentsCanReach(testConfig({ ...TOKENS, ...redis, RUNS_STORE: 'memory' }), 'process-group'), [
    /secrets/, /^Redis, over the network, with its URL: require AUTH/
  ])
})

t.test('with AGENT_USER, tokens and no Redis: ' +
  'nothing known to be open', { skip: process.getuid?.() !== 0 && 'AGENT_USER needs root' }, async (t) => {
  t.same(whatAgentsCanReach(testConfig({ ...TOKENS, AGENT_USER: 'nobody' }), 'process-group'), [])
  t.match(
    whatAgentsCanReach(testConfig({ ...TOKENS, ...redis, AGENT_USER: 'nobody' }), 'process-group'), [/^Redis/],
    'Redis is a network service: no user keeps an agent from it'
  )
})

import pino from 'pino'
import { buildApp, loggerOptions } from '../dist/app.js'
import { loadConfig } from '../dist/config.js'
const config = loadConfig({ LOG_LEVEL: 'info', CRUSH_BIN: '/bin/true', MAX_CRUSH_AGENTS: '1' })
const app = await buildApp(config, { logger: { ...loggerOptions(config), stream: pino.destination('/dev/null') } })
app.post('/bench/trivial', { schema: { body: { type: 'object', properties: { task: { type: 'string', minLength: 1 } }, required: ['task'] } } }, async () => ({ ok: true }))
await app.ready()
await app.slots.acquire('crush_run')
const N = 20000
for (const [url, payload] of [['/bench/trivial', '{"task":"x"}'], ['/tools/crush_run', '{"task":"x"}'], ['/tools/crush_run', '{"task":""}']]) {
  for (let i = 0; i < 2000; i++) await app.inject({ method: 'POST', url, payload, headers: { 'content-type': 'application/json' } })
  const t0 = performance.now()
  for (let i = 0; i < N; i++) await app.inject({ method: 'POST', url, payload, headers: { 'content-type': 'application/json' } })
  console.log(url, payload, ((performance.now() - t0) * 1000 / N).toFixed(1), 'us/req')
}
await app.close()

import closeWithGrace from 'close-with-grace'
import { buildApp } from './app.js'
import { loadConfig, type Config } from './config.js'

let config: Config
try {
  config = loadConfig()
} catch (error) {
  console.error(`agent-runner: invalid configuration: ${(error as Error).message}`)
  process.exit(1)
}

const app = await buildApp(config)

// Agents get the kill grace twice (SIGINT → SIGTERM → SIGKILL) to stop before their requests answer.
closeWithGrace({ delay: config.killGraceMs * 2 + 5000, logger: app.log }, async ({ signal, err }) => {
  if (err) app.log.error({ err }, 'closing after an error')
  else app.log.info({ signal }, 'closing: stopping agents and answering their requests')
  await app.close()
})

// Windows never delivers SIGTERM: Ctrl-C arrives as SIGINT, Ctrl-Break (and a service manager's stop, through
// GenerateConsoleCtrlEvent) as SIGBREAK, which close-with-grace does not listen to. Both close gracefully.
process.on('SIGBREAK', () => process.emit('SIGINT', 'SIGINT'))

try {
  await app.listen({ host: config.host, port: config.port })
} catch (error) {
  app.log.fatal({ err: error }, 'could not listen')
  process.exit(1)
}

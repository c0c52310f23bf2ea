// The yardstick for startup and idle memory: Fastify's hello world, with the one route the bench asks for.
import Fastify from 'fastify'

const app = Fastify({ logger: true })
app.get('/healthz', async () => ({ status: 'ok' }))
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) })

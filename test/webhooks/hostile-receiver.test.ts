import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import t from 'tap'
import { call, createRun, settled, startServer, until } from '../helpers/index.js'
import { webhookReceiver } from '../helpers/webhook-receiver.js'

// A receiver answering a gigabyte costs the service a bounded read, not its memory: measured on the service as its
// own process (its peak resident set, VmHWM), against the same service's peak before.

const SECRET = `whsec_${randomBytes(32).toString('base64')}`
const GIB = 1024 ** 3

const peakRssKb = (pid: number): number =>
  Number(/^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'))![1])

t.test('a receiver answering 1 GiB: delivered, read no further than 64 KiB, the service’s RSS bounded', async (t) => {
  let written = 0
  const chunk = Buffer.alloc(256 * 1024, 'x')
  const { url } = await webhookReceiver(t, () => (response) => {
    response.writeHead(200, { 'content-length': String(GIB) })
    const pump = (): void => {
      while (written < GIB && !response.destroyed) {
        written += chunk.length
        if (!response.write(chunk)) return void response.once('drain', pump)
      }
    }
    pump()
  })
  const service = await startServer(t, { WEBHOOK_SECRET: SECRET, WEBHOOK_ALLOW_HOSTS: '127.0.0.1' })
  // Warmed up first (a run, its store), so that what is measured is the delivery.
  await settled(service.base, (await createRun(service.base, { tool: 'crush_run', task: 'warm up' })).id)
  const before = peakRssKb(service.child.pid!)
  const { id } = await createRun(service.base, { tool: 'crush_run', task: 'x', webhook: { url } })
  const delivered = await until(
    async () => (await call(service.base, 'GET', `/runs/${id}/deliveries`)).body.deliveries[0],
    (delivery) => delivery?.state === 'delivered', 15_000, 'delivered'
  )
  t.match(delivered.attempts, [{ status: 200 }])
  const grown = peakRssKb(service.child.pid!) - before
  t.ok(grown < 32 * 1024, `the service's peak RSS grew by ${String(grown)} kB`)
  t.ok(written < 64 * 1024 * 1024, `the receiver got ${String(written)} bytes out before the connection closed`)
})

import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { Webhook as StandardWebhook } from 'standardwebhooks'
import { Webhook as SvixWebhook } from 'svix'
import t, { type Test } from 'tap'
import { parseAllowList } from '#src/webhooks/address-policy.js'
import { attemptDelivery, RESPONSE_READ_LIMIT_BYTES } from '#src/webhooks/attempt.js'
import { signedHeaders } from '#src/webhooks/signature.js'
import { checkedTarget } from '#src/webhooks/target.js'
import { webhookReceiver } from '../helpers/webhook-receiver.js'

// One delivery attempt against real receivers on loopback (allowed here as WEBHOOK_ALLOW_HOSTS would allow it):
// signatures checked by the standardwebhooks package and by svix's verifier, unmodified; what each kind of answer
// makes of the attempt. Loopback only: nothing here sends anything elsewhere.

const LOOPBACK = parseAllowList(['127.0.0.0/8'])
const newSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`

async function receiver(t: Test, answer: Parameters<typeof webhookReceiver>[1]) {
  const found = await webhookReceiver(t, answer)
  return { ...found, url: new URL(found.url) }
}

const deliver = async (url: URL, secrets: string[], body = '{"type":"run.finished"}', timeoutMs?: number) =>
  attemptDelivery({
    target: await checkedTarget(url, LOOPBACK),
    headers: { ...signedHeaders(secrets, 'msg_2c8d', new Date(), body), 'user-agent': 'agent-runner/test' },
    body,
    ...(timeoutMs === undefined ? {} : { timeoutMs })
  })

t.test('a delivery verifies with the standardwebhooks package and with svix’s verifier, unmodified', async (t) => {
  const secret = newSecret()
  const { url, received } = await receiver(t, () => 204)
  const body = JSON.stringify({ type: 'run.finished', timestamp: new Date().toISOString(), data: { id: 'r1' } })
  t.match(await deliver(url, [secret], body), { kind: 'delivered', status: 204 })
  const [got] = received
  t.equal(got?.body, body, 'the body as signed')
  t.equal(got?.headers['content-type'], 'application/json')
  t.equal(got?.headers['webhook-id'], 'msg_2c8d')
  t.match(got?.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=*$/)
  const headers = got!.headers as Record<string, string>
  t.same(new StandardWebhook(secret).verify(got!.body, headers), JSON.parse(body), 'standardwebhooks verifies it')
  t.same(new SvixWebhook(secret).verify(got!.body, headers), JSON.parse(body), 'svix verifies it')
  t.throws(() => new StandardWebhook(newSecret()).verify(got!.body, headers), 'another secret does not')
  t.throws(() => new SvixWebhook(newSecret()).verify(got!.body, headers), 'for svix either')
  t.throws(() => new StandardWebhook(secret).verify(`${got!.body} `, headers), 'nor does another body')
})

t.test('during a rotation the old secret and the new one each verify the same delivery', async (t) => {
  const [old, next] = [newSecret(), newSecret()]
  const { url, received } = await receiver(t, () => 200)
  t.match(await deliver(url, [old, next]), { kind: 'delivered', status: 200 })
  const { body, headers } = received[0]!
  t.equal(String(headers['webhook-signature']).split(' ').length, 2, 'two signatures in the header')
  for (const [name, secret] of [['old', old], ['new', next]] as const) {
    t.doesNotThrow(() => new StandardWebhook(secret).verify(body, headers as Record<string, string>), name)
    t.doesNotThrow(() => new SvixWebhook(secret).verify(body, headers as Record<string, string>), `${name} (svix)`)
  }
})

t.test('what is not a 2xx fails the attempt: 5xx, 4xx, a redirect (never followed); 410 ends the delivery',
  async (t) => {
    const { url, received } = await receiver(t, (request) => {
      if (request.url.endsWith('/302')) return (response) => response.writeHead(302, { location: '/hooks/x' }).end()
      return Number(/\/(\d+)$/.exec(request.url)?.[1] ?? 200)
    })
    const at = (path: string) => new URL(path, url)
    t.match(await deliver(at('/500'), [newSecret()]), { kind: 'failed', status: 500 })
    t.match(await deliver(at('/400'), [newSecret()]), { kind: 'failed', status: 400 })
    t.match(await deliver(at('/302'), [newSecret()]), { kind: 'failed', status: 302 })
    t.match(await deliver(at('/410'), [newSecret()]), { kind: 'gone', status: 410 })
    t.same(received.map((request) => request.url), ['/500', '/400', '/302', '/410'], 'the redirect was not followed')
  })

t.test('a refused connection, and a receiver that never answers, fail within the attempt’s bound', async (t) => {
  const { url, server } = await receiver(t, () => null)
  t.match(await deliver(url, [newSecret()], '{}', 300), { kind: 'failed', status: null, error: /no answer within 300/ })
  server.closeAllConnections()
  server.close()
  await once(server, 'close')
  t.match(await deliver(url, [newSecret()]), { kind: 'failed', status: null, error: 'ECONNREFUSED' })
})

/** The most a loopback connection's two sockets buffer, as Linux sizes them (8 MiB where it cannot be read). */
function socketBuffersMax(): number {
  const largest = (path: string): number => Number(readFileSync(path, 'utf8').trim().split(/\s+/).at(-1))
  try {
    return largest('/proc/sys/net/ipv4/tcp_wmem') + largest('/proc/sys/net/ipv4/tcp_rmem')
  } catch {
    return 8 * 1024 * 1024
  }
}

t.test('an answer of a gigabyte is read no further than its first 64 KiB', async (t) => {
  let written = 0
  let closed: () => void = () => {}
  const gone = new Promise<void>((resolve) => { closed = resolve })
  const chunk = Buffer.alloc(64 * 1024, 'x')
  const { url } = await receiver(t, () => (response) => {
    response.writeHead(200, { 'content-length': String(1024 ** 3) })
    const pump = (): void => {
      while (written < 1024 ** 3 && !response.destroyed) {
        written += chunk.length
        if (!response.write(chunk)) return void response.once('drain', pump)
      }
    }
    response.on('close', closed)
    pump()
  })
  t.match(await deliver(url, [newSecret()]), { kind: 'delivered', status: 200 })
  await gone
  // What the receiver managed to write before the connection went: the bounded read plus what the two sockets'
  // buffers can hold, which the kernel sizes itself (up to tcp_wmem's and tcp_rmem's largest), and a chunk in hand.
  const bound = RESPONSE_READ_LIMIT_BYTES + socketBuffersMax() + chunk.length
  t.ok(written <= bound, `the receiver wrote ${String(written)} bytes before the close (at most ${String(bound)})`)
  t.ok(bound < 1024 ** 3 / 8, 'a bound far below the answer\'s size')
})

t.test('the connection goes to the address that was checked: the name is never looked up a second time', async (t) => {
  const { url, received } = await receiver(t, () => 204)
  // A name no resolver of this machine knows: only the check's own lookup (the test's) gives it an address.
  const named = new URL(url)
  named.hostname = 'receiver.rebinding.invalid'
  const target = await checkedTarget(named, parseAllowList(['receiver.rebinding.invalid']), async () => [
    { address: '127.0.0.1', family: 4 }
  ])
  const body = '{}'
  const headers = { ...signedHeaders([newSecret()], 'msg_1', new Date(), body) }
  t.match(await attemptDelivery({ target, headers, body }), { kind: 'delivered' })
  t.equal(received[0]?.headers.host, named.host, 'the request still names its host')
})

t.test('a receiver that trickles its answer a byte at a time is cut off at the attempt’s bound', async (t) => {
  const { url } = await receiver(t, () => (response) => {
    const socket = response.socket!
    socket.write('HTTP/1.1 200 OK\r\n')
    const trickle = setInterval(() => socket.write('x'), 20)
    socket.once('close', () => clearInterval(trickle))
  })
  t.match(await deliver(url, [newSecret()], '{}', 400), { kind: 'failed', status: null, error: /no answer within 400/ })
})

import { appendFileSync, readFileSync, writeFileSync } from 'node:fs'
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { NOTHING_ALLOWED, parseAllowList } from '#src/webhooks/address-policy.js'
import { checkedTarget } from '#src/webhooks/target.js'

// Which URLs a webhook may reach (src/webhooks/address-policy.ts, target.ts). Nothing here connects anywhere: the
// resolver is the test's, except for the /etc/hosts name, which is only looked up.

/** A resolver for names the test gives; a literal address must never be looked up. */
const resolvesTo = (...addresses: string[]) => async (host: string) => {
  if (/^[\d.]+$|:/.test(host)) throw new Error(`looked up a literal: ${host}`)
  return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
}
const PUBLIC = resolvesTo('93.184.216.34')

const REFUSED = [
  'http://127.0.0.1/hook', 'http://0x7f.1/hook', 'http://127.1/hook', 'http://2130706433/', 'http://017700000001/',
  'http://[::ffff:127.0.0.1]/', 'http://[::1]/', 'http://[0:0:0:0:0:0:0:1]/', 'http://localhost/', 'http://LocalHost./',
  'http://app.localhost/', 'http://10.1.2.3/', 'http://172.16.0.1/', 'http://192.168.1.1/', 'http://169.254.169.254/',
  'http://169.254.169.254./latest/meta-data/', 'http://100.64.0.1/', 'http://100.100.100.200/', 'http://224.0.0.1/',
  'http://255.255.255.255/', 'http://0.0.0.0/', 'http://0/', 'http://[::]/', 'http://[fe80::1]/',
  'http://[fd00:ec2::254]/', 'http://[ff02::1]/', 'http://[2002:7f00:1::]/', 'http://[64:ff9b::7f00:1]/',
  'http://[::ffff:10.0.0.1]/', 'http://198.18.0.1/', 'ftp://example.com/', 'file:///etc/passwd',
  'gopher://example.com/', 'http://user:secret@example.com/',
  // IPv6 outside global unicast (2000::/3): IPv4-compatible (::/96, which some stacks still route to IPv4), and
  // whatever IANA has not given out
  'http://[::7f00:1]/', 'http://[::a00:1]/', 'http://[100:1::1]/', 'http://[4000::1]/', 'http://[e000::1]/'
]

t.test('every internal, special or non-http address form is refused, before any lookup', async (t) => {
  for (const url of REFUSED) {
    await t.rejects(checkedTarget(new URL(url), NOTHING_ALLOWED, PUBLIC), { name: 'WebhookTargetRefused' }, url)
  }
})

t.test('a public name is pinned to the address it resolved to; a name with any internal address is refused',
  async (t) => {
    t.match(await checkedTarget(new URL('https://hooks.example.com/x'), NOTHING_ALLOWED, PUBLIC), {
      address: '93.184.216.34', family: 4
    })
    t.match(await checkedTarget(new URL('http://93.184.216.34:8080/x'), NOTHING_ALLOWED, PUBLIC), {
      address: '93.184.216.34'
    }, 'a public literal needs no lookup')
    for (const internal of ['10.0.0.7', '127.0.0.1', '::1', '::ffff:192.168.0.1', 'fd12::1']) {
      await t.rejects(
        checkedTarget(new URL('https://hooks.example.com/x'), NOTHING_ALLOWED, resolvesTo('93.184.216.34', internal)),
        { name: 'WebhookTargetRefused', message: new RegExp(`resolves to ${internal.replace(/\./g, '\\.')}`) },
        internal
      )
    }
    await t.rejects(checkedTarget(new URL('https://nowhere.example/'), NOTHING_ALLOWED, async () => {
      throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' })
    }), { message: /ENOTFOUND/ })
  })

t.test('WEBHOOK_ALLOW_HOSTS lets a receiver on the same network in: by range, by address, by name', async (t) => {
  const allow = parseAllowList(['10.0.0.0/8', '::1', 'receiver.internal.', 'LOCALHOST'])
  t.match(await checkedTarget(new URL('http://10.20.30.40/'), allow, PUBLIC), { address: '10.20.30.40' })
  t.match(await checkedTarget(new URL('http://[::1]:9/'), allow, PUBLIC), { address: '::1', family: 6 })
  t.match(await checkedTarget(new URL('http://[::ffff:10.1.1.1]/'), allow, PUBLIC), { address: '::ffff:a01:101' },
    'a mapped form of an allowed IPv4 address')
  t.match(await checkedTarget(new URL('http://Receiver.Internal/'), allow, resolvesTo('192.168.9.9')), {
    address: '192.168.9.9'
  }, 'an allowed name may resolve to an internal address')
  t.match(await checkedTarget(new URL('http://localhost/'), allow, resolvesTo('127.0.0.1')), { address: '127.0.0.1' })
  await t.rejects(checkedTarget(new URL('http://11.0.0.1.nip.example/'), allow, resolvesTo('127.0.0.1')),
    { name: 'WebhookTargetRefused' }, 'only what is named')
  await t.rejects(checkedTarget(new URL('http://127.0.0.1/'), allow, PUBLIC), { name: 'WebhookTargetRefused' })
  t.throws(() => parseAllowList(['10.0.0.0/33']), /not a CIDR range/)
})

t.test('a name that /etc/hosts points at 127.0.0.1 is refused, unless allowed by name',
  { skip: process.getuid?.() === 0 ? false : 'needs root to add a line to /etc/hosts' }, async (t) => {
    const name = `webhook-${randomUUID().slice(0, 8)}.agent-runner.test`
    const before = readFileSync('/etc/hosts', 'utf8')
    t.teardown(() => {
      // Only the test's own line goes: whatever else changed the file meanwhile stays.
      const now = readFileSync('/etc/hosts', 'utf8')
      writeFileSync('/etc/hosts', now.split('\n').filter((line) => !line.endsWith(` ${name}`)).join('\n'))
    })
    appendFileSync('/etc/hosts', `${before.endsWith('\n') ? '' : '\n'}127.0.0.1 ${name}\n`)
    await t.rejects(checkedTarget(new URL(`http://${name}:1/hook`), NOTHING_ALLOWED), {
      name: 'WebhookTargetRefused', message: /resolves to 127\.0\.0\.1/
    })
    t.match(await checkedTarget(new URL(`http://${name}:1/hook`), parseAllowList([name])), { address: '127.0.0.1' })
  })

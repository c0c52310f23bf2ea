import { randomBytes } from 'node:crypto'
import t from 'tap'
import { MAX_RETRY_DELAY_MS, nextAttemptDelay } from '#src/webhooks/schedule.js'
import { parseWebhookSecrets, secretsOf } from '#src/webhooks/secrets.js'

// When a failed delivery is tried again (src/webhooks/schedule.ts), and whose secrets sign it (secrets.ts).

const DAY = 24 * 60 * 60 * 1000

t.test('retries back off exponentially from the base, capped at an hour, each spread by ±20 %', async (t) => {
  const middle = () => 0.5
  const delays = Array.from({ length: 16 }, (_, index) => nextAttemptDelay(index + 1, 5000, 0, DAY, middle))
  t.same(delays.slice(0, 5), [5000, 10_000, 20_000, 40_000, 80_000])
  t.equal(delays.at(-1), MAX_RETRY_DELAY_MS)
  t.equal(nextAttemptDelay(3, 5000, 0, DAY, () => 0), 16_000, 'at most 20 % sooner')
  t.equal(nextAttemptDelay(3, 5000, 0, DAY, () => 1), 24_000, 'at most 20 % later')
})

t.test('a delivery is given up once its next attempt would fall past WEBHOOK_RETRY_FOR_MS', async (t) => {
  t.equal(nextAttemptDelay(1, 5000, DAY - 5000, DAY, () => 0.5), 5000, 'just within')
  t.equal(nextAttemptDelay(1, 5000, DAY - 4999, DAY, () => 0.5), null, 'just past')
})

t.test('a token’s own secrets replace the shared one; a name given twice is a rotation', async (t) => {
  const [shared, old, next] = Array.from({ length: 3 }, () => `whsec_${randomBytes(24).toString('base64')}`)
  const secrets = parseWebhookSecrets(shared!, [`studio:${old!}`, `studio:${next!}`])
  t.same(secretsOf(secrets, 'studio'), [old, next])
  t.same(secretsOf(secrets, 'ci'), [shared])
  t.same(secretsOf(parseWebhookSecrets('', [`studio:${old!}`]), 'ci'), [], 'no secret: not configured')
  t.throws(() => parseWebhookSecrets('whsec_c2hvcnQ=', []), /at least 24 random bytes/)
  t.throws(() => parseWebhookSecrets('', ['studio:plaintext']), /WEBHOOK_SECRETS \(studio\)/)
  t.throws(() => parseWebhookSecrets('', [old!]), /name:whsec_/)
})

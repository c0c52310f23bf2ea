import { randomUUID } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import { attemptDelivery, type AttemptOutcome } from './attempt.js'
import { lostRunBody } from './events.js'
import type { AfterAttempt, DeliveryAttempt, WebhookDelivery, WebhookOutbox } from './outbox.js'
import type { WebhookSettings } from './policy.js'
import { nextAttemptDelay } from './schedule.js'
import { secretsOf } from './secrets.js'
import { signedHeaders } from './signature.js'
import { checkedTarget, WebhookTargetRefused, type Resolver } from './target.js'

/** How one attempt went, for the metrics: the delivery's outcome once it ended, else `failed`. */
export type AttemptVerdict = 'delivered' | 'failed' | 'gone' | 'given_up'

export interface DispatcherOptions {
  outbox: WebhookOutbox
  settings: WebhookSettings
  /** This replica: whose attempts its claims are. */
  replica: string
  userAgent: string
  log: FastifyBaseLogger
  /** Told of each attempt (the metrics): never asked. */
  attempted?: (verdict: AttemptVerdict) => void
  /** How often the outbox is looked at for what fell due (retries, another replica's deliveries). */
  pollMs?: number
  /** Attempts at once, at most: a crowd of slow receivers costs this many sockets. */
  maxInFlight?: number
  attemptTimeoutMs?: number
  resolve?: Resolver
}

/** A2A's JSON, as its push notifications are sent. */
const A2A_MEDIA_TYPE = 'application/a2a+json'

const DEFAULT_POLL_MS = 1000
const DEFAULT_MAX_IN_FLIGHT = 16
const DEFAULT_ATTEMPT_TIMEOUT_MS = 10_000

/**
 * Sends what the outbox holds, at least once: each due delivery claimed (one replica per attempt), signed with its
 * token's secrets at the moment it is sent, attempted, and its attempt recorded with what follows (due again after a
 * backoff, or ended). Armed deliveries whose replica died become their run's `lost` end. Nothing here holds a run or a
 * slot: a receiver that never answers costs one socket for the attempt's bound.
 */
export class WebhookDispatcher {
  readonly #options: DispatcherOptions
  readonly #inFlight = new Set<Promise<void>>()
  #timer: NodeJS.Timeout | undefined
  #polling: Promise<void> | undefined
  #again = false
  #closed = false

  constructor(options: DispatcherOptions) {
    this.#options = options
  }

  start(): void {
    this.#schedule(0)
  }

  /** Something may be due now (a run just started or ended here): look without waiting for the next poll. */
  wake(): void {
    if (this.#closed) return
    if (this.#polling !== undefined) this.#again = true
    else this.#schedule(0)
  }

  /** Stops looking and waits for the attempts under way (each bounded); what is left is delivered by a later life. */
  async close(): Promise<void> {
    this.#closed = true
    clearTimeout(this.#timer)
    await this.#polling
    await Promise.all(this.#inFlight)
  }

  #schedule(delayMs: number): void {
    clearTimeout(this.#timer)
    this.#timer = setTimeout(() => void this.#poll(), delayMs)
    this.#timer.unref()
  }

  #poll(): Promise<void> {
    this.#polling = this.#pollOnce()
      .catch((error: unknown) => this.#options.log.warn({ err: error }, 'webhook deliveries could not be read'))
      .finally(() => {
        this.#polling = undefined
        if (this.#closed) return
        const again = this.#again
        this.#again = false
        this.#schedule(again ? 0 : this.#options.pollMs ?? DEFAULT_POLL_MS)
      })
    return this.#polling
  }

  async #pollOnce(): Promise<void> {
    const { outbox } = this.#options
    const now = new Date()
    for (const orphan of await outbox.orphanedDeliveries()) {
      await outbox.fireDelivery(orphan.id, orphan.push?.lostBody ?? lostRunBody(orphan.body, now), now)
    }
    const room = (this.#options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT) - this.#inFlight.size
    if (room <= 0) return
    for (const delivery of await outbox.dueDeliveries(now, room)) {
      if (this.#closed) return
      const timeoutMs = this.#options.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS
      // One holder per attempt, even within this replica: a poll that read the delivery as due while this replica's
      // own attempt was under way cannot claim it again. Held a little past the attempt's own bound: a claim that
      // lapses first would let a second attempt in.
      const holder = `${this.#options.replica}:${randomUUID()}`
      if (!(await outbox.claimDelivery(delivery.id, holder, timeoutMs + 5000))) continue
      const current = await this.#stillDue(delivery, now, holder)
      if (current === undefined) continue
      const attempt = this.#attempt(current).catch((error: unknown) => {
        const { run, id } = current
        this.#options.log.error({ err: error, run, webhook: id }, 'a webhook attempt failed to end')
      }).finally(() => {
        this.#inFlight.delete(attempt)
        // Room again: what waited for it need not wait for the next poll.
        this.wake()
      })
      this.#inFlight.add(attempt)
    }
  }

  /**
   * The delivery as it is now that it is claimed: an attempt recorded (by this replica or another) between the read
   * of what was due and the claim has released the claim already, and the delivery may be delivered by now. Released
   * again, and skipped, when it is no longer due.
   */
  async #stillDue(read: WebhookDelivery, now: Date, holder: string): Promise<WebhookDelivery | undefined> {
    const { outbox } = this.#options
    const current = (await outbox.deliveriesOf(read.run)).find((each) => each.id === read.id)
    const due = current?.state === 'pending' && Date.parse(current.nextAttemptAt!) <= now.getTime()
    if (due) return current
    await outbox.releaseDelivery(read.id, holder)
    return undefined
  }

  async #attempt(delivery: WebhookDelivery): Promise<void> {
    const { outbox, settings, log } = this.#options
    const at = new Date()
    const outcome = await this.#send(delivery, at)
    const after = this.#after(delivery, outcome, at)
    const attempt: DeliveryAttempt = {
      at: at.toISOString(),
      status: outcome.status,
      error: outcome.kind === 'failed' ? outcome.error : null,
      durationMs: outcome.durationMs
    }
    await outbox.recordAttempt(delivery.id, attempt, after).catch((error: unknown) => {
      log.warn({ err: error, run: delivery.run, webhook: delivery.id }, 'a webhook attempt could not be recorded')
    })
    const verdict: AttemptVerdict = after.state === 'pending' ? 'failed' : after.state
    this.#options.attempted?.(verdict)
    if (verdict === 'delivered') return
    // The run and the delivery, never the secret nor the URL's path and query (which may carry a receiver's token).
    log.warn({
      run: delivery.run,
      webhook: delivery.id,
      type: delivery.type,
      host: new URL(delivery.url).host,
      status: attempt.status,
      error: attempt.error,
      attempts: delivery.attempts.length + 1,
      next_attempt_at: after.nextAttemptAt,
      retry_for_ms: settings.retryForMs
    }, verdict === 'failed' ? 'webhook attempt failed' : `webhook delivery ${verdict}`)
  }

  /** One attempt at the address checked now; a target refused now (its DNS changed) fails like a refused connection. */
  async #send(delivery: WebhookDelivery, at: Date): Promise<AttemptOutcome> {
    const { settings, userAgent, resolve } = this.#options
    const secrets = secretsOf(settings.secrets, delivery.caller)
    if (secrets.length === 0 && delivery.push === undefined) {
      return { kind: 'failed', status: null, error: 'its token has no webhook secret any more', durationMs: 0 }
    }
    const signed = secrets.length === 0 ? {} : signedHeaders(secrets, delivery.id, at, delivery.body)
    // An A2A push carries what its receiver asked for, in A2A's media type; signed as well where the token can sign.
    const push = delivery.push === undefined ? {} : { ...delivery.push.headers, 'content-type': A2A_MEDIA_TYPE }
    try {
      const target = await checkedTarget(new URL(delivery.url), settings.allow, resolve)
      return await attemptDelivery({
        target,
        headers: { ...signed, ...push, 'user-agent': userAgent },
        body: delivery.body,
        timeoutMs: this.#options.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS
      })
    } catch (error) {
      // Whatever went wrong (an address refused now, a header Node will not send, a bug) is this attempt's failure,
      // retried and given up in time like a refusal: never a rejection that ends the process.
      if (!(error instanceof WebhookTargetRefused)) {
        this.#options.log.error({ err: error, run: delivery.run, webhook: delivery.id }, 'a webhook attempt threw')
      }
      const reason = error instanceof Error ? error.message : String(error)
      return { kind: 'failed', status: null, error: reason, durationMs: 0 }
    }
  }

  #after(delivery: WebhookDelivery, outcome: AttemptOutcome, at: Date): AfterAttempt {
    if (outcome.kind === 'delivered') return { state: 'delivered', nextAttemptAt: null }
    if (outcome.kind === 'gone') return { state: 'gone', nextAttemptAt: null }
    const { retryBaseMs, retryForMs } = this.#options.settings
    if (delivery.push === undefined && secretsOf(this.#options.settings.secrets, delivery.caller).length === 0) {
      return { state: 'given_up', nextAttemptAt: null }
    }
    const failed = delivery.attempts.length + 1
    const delay = nextAttemptDelay(failed, retryBaseMs, at.getTime() - Date.parse(delivery.createdAt), retryForMs)
    return delay === null
      ? { state: 'given_up', nextAttemptAt: null }
      : { state: 'pending', nextAttemptAt: new Date(at.getTime() + delay).toISOString() }
  }
}

import { randomUUID } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { RunState } from '../schemas/runs.js'
import type { ListedWebhook, WebhookEventType } from '../schemas/webhooks.js'
import { eventBody } from '../webhooks/events.js'
import type { PushForm, WebhookDelivery, WebhookOutbox } from '../webhooks/outbox.js'
import { isEnd } from './run-phase.js'
import { stateOf } from './run-state.js'
import type { Run, RunPush } from './run.js'

export interface RunWebhooksOptions {
  outbox: WebhookOutbox
  /** This replica, whose death makes the run's armed end a `lost` one. */
  replica: string
  /** Something is due now: the dispatcher need not wait for its next look. */
  due: () => void
  log: FastifyBaseLogger
}

/** One receiver of a run's events, in its form: what it wants, and each event's body for it. */
interface Receiver {
  url: string
  wants: (type: WebhookEventType) => boolean
  body: (type: WebhookEventType, at: Date, state: RunState) => string
  /** An A2A push's form, but its lost end (made as the end is armed). */
  push?: Omit<PushForm, 'lostBody'> & { lostBody: (state: RunState) => string }
}

const standard = (webhook: ListedWebhook): Receiver => ({
  url: webhook.url,
  wants: (type) => webhook.events.includes(type),
  body: eventBody
})

const a2aPush = (push: RunPush): Receiver => ({
  url: push.url,
  wants: () => true,
  body: (type, _at, state) => push.bodyOf(type === 'run.started' ? 'started' : 'finished', state),
  push: {
    config: push.config,
    headers: push.headers,
    lostBody: (state) => push.bodyOf('finished', { ...state, status: 'lost', result: null })
  }
})

/** Whom a run tells of its start and end: its webhook (Standard Webhooks), its A2A push config. */
function receiversOf(run: Run): Receiver[] {
  return [
    ...(run.webhook === undefined ? [] : [standard(run.webhook)]),
    ...(run.push === undefined ? [] : [a2aPush(run.push)])
  ]
}

/**
 * A run's webhook events, put in the outbox as its phases come: once its agent runs, each receiver's run.started due
 * at once and its run.finished armed with the run as it started (what is delivered, made `lost`, if this replica dies
 * before the end); at its end, each run.finished fired with the run as GET /runs/{id} then answers. A run refused
 * before its agent started is told to its caller by its own answer, and to no receiver. Resolves once its ends are in
 * the outbox.
 */
export function deliverRunWebhooks(run: Run, options: RunWebhooksOptions): Promise<void> {
  const { outbox, replica, due, log } = options
  const receivers = receiversOf(run).map((receiver) => ({ receiver, finishedId: `msg_${randomUUID()}` }))
  let added: Promise<boolean> | undefined
  return new Promise((resolve) => {
    run.on('phase', () => {
      if (run.phase === 'running') {
        const deliveries = receivers.flatMap(({ receiver, finishedId }) =>
          deliveriesAtStart(run, receiver, replica, finishedId))
        added = outbox.addDeliveries(deliveries).then(
          () => {
            due()
            return true
          },
          (error: unknown) => {
            log.error({ err: error, run: run.id }, 'the run’s webhook deliveries could not be stored: none is sent')
            return false
          }
        )
      } else if (isEnd(run.phase)) {
        const ending = receivers.filter(({ receiver }) => receiver.wants('run.finished'))
        if (added === undefined || ending.length === 0) return resolve(added?.then(() => undefined))
        resolve(added.then(async (stored) => {
          if (!stored) return
          const now = new Date()
          const state = stateOf(run.snapshot())
          for (const { receiver, finishedId } of ending) {
            await outbox.fireDelivery(finishedId, receiver.body('run.finished', now, state), now)
          }
          due()
        }).catch((error: unknown) => {
          log.error({ err: error, run: run.id }, 'the run’s end could not be given to its webhook')
        }))
      }
    })
  })
}

function deliveriesAtStart(run: Run, receiver: Receiver, replica: string, finishedId: string): WebhookDelivery[] {
  const now = new Date()
  const state = stateOf(run.snapshot())
  const common = {
    run: run.id, caller: run.caller, url: receiver.url, replica, attempts: [], createdAt: now.toISOString()
  }
  const form = (lostBody: string | null) =>
    receiver.push === undefined ? {} : { push: { ...receiver.push, lostBody } }
  const deliveries: WebhookDelivery[] = []
  if (receiver.wants('run.started')) {
    deliveries.push({
      ...common,
      id: `msg_${randomUUID()}`,
      type: 'run.started',
      body: receiver.body('run.started', now, state),
      state: 'pending',
      nextAttemptAt: now.toISOString(),
      ...form(null)
    })
  }
  if (receiver.wants('run.finished')) {
    deliveries.push({
      ...common,
      id: finishedId,
      type: 'run.finished',
      body: receiver.body('run.finished', now, state),
      state: 'armed',
      nextAttemptAt: null,
      ...form(receiver.push?.lostBody(state) ?? null)
    })
  }
  return deliveries
}

import { randomUUID } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { ListedWebhook } from '../schemas/webhooks.js'
import { eventBody } from '../webhooks/events.js'
import type { WebhookDelivery, WebhookOutbox } from '../webhooks/outbox.js'
import { isEnd } from './run-phase.js'
import { stateOf } from './run-state.js'
import type { Run } from './run.js'

export interface RunWebhooksOptions {
  outbox: WebhookOutbox
  /** This replica, whose death makes the run's armed end a `lost` one. */
  replica: string
  /** Something is due now: the dispatcher need not wait for its next look. */
  due: () => void
  log: FastifyBaseLogger
}

/**
 * A run's webhook events, put in the outbox as its phases come: once its agent runs, its run.started due at once and
 * its run.finished armed with the run as it started (what is delivered, made `lost`, if this replica dies before the
 * end); at its end, its run.finished fired with the run as GET /runs/{id} then answers. A run refused before its agent
 * started is told to its caller by its own answer, and to no receiver. Resolves once its end is in the outbox.
 */
export function deliverRunWebhooks(run: Run, webhook: ListedWebhook, options: RunWebhooksOptions): Promise<void> {
  const { outbox, replica, due, log } = options
  const finishedId = `msg_${randomUUID()}`
  const wants = (type: WebhookDelivery['type']): boolean => webhook.events.includes(type)
  let added: Promise<boolean> | undefined
  return new Promise((resolve) => {
    run.on('phase', () => {
      if (run.phase === 'running') {
        added = outbox.addDeliveries(deliveriesAtStart(run, webhook, replica, finishedId, wants)).then(
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
        if (added === undefined || !wants('run.finished')) return resolve(added?.then(() => undefined))
        resolve(added.then(async (stored) => {
          if (!stored) return
          const now = new Date()
          await outbox.fireDelivery(finishedId, eventBody('run.finished', now, stateOf(run.snapshot())), now)
          due()
        }).catch((error: unknown) => {
          log.error({ err: error, run: run.id }, 'the run’s end could not be given to its webhook')
        }))
      }
    })
  })
}

function deliveriesAtStart(
  run: Run,
  webhook: ListedWebhook,
  replica: string,
  finishedId: string,
  wants: (type: WebhookDelivery['type']) => boolean
): WebhookDelivery[] {
  const now = new Date()
  const state = stateOf(run.snapshot())
  const common = {
    run: run.id, caller: run.caller, url: webhook.url, replica, attempts: [], createdAt: now.toISOString()
  }
  const deliveries: WebhookDelivery[] = []
  if (wants('run.started')) {
    deliveries.push({
      ...common,
      id: `msg_${randomUUID()}`,
      type: 'run.started',
      body: eventBody('run.started', now, state),
      state: 'pending',
      nextAttemptAt: now.toISOString()
    })
  }
  if (wants('run.finished')) {
    deliveries.push({
      ...common,
      id: finishedId,
      type: 'run.finished',
      body: eventBody('run.finished', now, state),
      state: 'armed',
      nextAttemptAt: null
    })
  }
  return deliveries
}

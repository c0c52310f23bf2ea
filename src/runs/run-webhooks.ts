import { randomUUID } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { RunState } from '../schemas/runs.js'
import type { ListedWebhook, WebhookEventType } from '../schemas/webhooks.js'
import { eventBody } from '../webhooks/events.js'
import type { WebhookDelivery, WebhookOutbox } from '../webhooks/outbox.js'
import { isEnd } from './run-phase.js'
import { stateOf } from './run-state.js'
import type { Run, RunPush } from './run.js'

/**
 * An A2A push's body for a task as it starts or as it ended (one lost given as one whose status is `lost`): made by
 * whoever speaks A2A (runs/ knows no protocol).
 */
export type PushBody = (moment: 'started' | 'finished', state: RunState) => Promise<string>

export interface RunWebhooksOptions {
  outbox: WebhookOutbox
  /** This replica, whose death makes the run's armed end a `lost` one. */
  replica: string
  /** Something is due now: the dispatcher need not wait for its next look. */
  due: () => void
  pushBody: PushBody
  log: FastifyBaseLogger
}

/** The end of an armed delivery, as its receiver takes it: its A2A push's, or Standard Webhooks' run.finished. */
const endBody = (delivery: WebhookDelivery, state: RunState, at: Date, pushBody: PushBody): Promise<string> =>
  delivery.push === undefined ? Promise.resolve(eventBody('run.finished', at, state)) : pushBody('finished', state)

/** A run's armed ends in the outbox, each given its body as the run ended: whoever armed them, whenever. */
export async function fireEnds(
  outbox: WebhookOutbox, run: string, state: RunState, pushBody: PushBody
): Promise<boolean> {
  const now = new Date()
  const armed = (await outbox.deliveriesOf(run)).filter((delivery) => delivery.state === 'armed')
  for (const delivery of armed) {
    await outbox.fireDelivery(delivery.id, await endBody(delivery, state, now, pushBody), now)
  }
  return armed.length > 0
}

/**
 * An A2A push's two deliveries, as its task is now: its current status due at once, its end armed (made `lost` if the
 * replica running it dies first).
 */
export async function pushDeliveries(
  push: RunPush, state: RunState, where: { caller: string; replica: string }, pushBody: PushBody
): Promise<WebhookDelivery[]> {
  const now = new Date().toISOString()
  const common = { run: state.id, ...where, url: push.url, attempts: [], createdAt: now }
  const form = { config: push.config, headers: push.headers }
  return [
    {
      ...common,
      id: `msg_${randomUUID()}`,
      type: 'run.started',
      body: await pushBody('started', state),
      state: 'pending',
      nextAttemptAt: now,
      push: { ...form, lostBody: null }
    },
    {
      ...common,
      id: `msg_${randomUUID()}`,
      type: 'run.finished',
      body: await pushBody('finished', state),
      state: 'armed',
      nextAttemptAt: null,
      push: { ...form, lostBody: await pushBody('finished', { ...state, status: 'lost', result: null }) }
    }
  ]
}

function webhookDeliveries(webhook: ListedWebhook, state: RunState, replica: string): WebhookDelivery[] {
  const now = new Date()
  const common = {
    run: state.id, caller: state.caller, url: webhook.url, replica, attempts: [], createdAt: now.toISOString()
  }
  const wants = (type: WebhookEventType): boolean => webhook.events.includes(type)
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
      id: `msg_${randomUUID()}`,
      type: 'run.finished',
      body: eventBody('run.finished', now, state),
      state: 'armed',
      nextAttemptAt: null
    })
  }
  return deliveries
}

/**
 * A run's webhook events, put in the outbox as its phases come: once its agent runs, its webhook's run.started and its
 * A2A push's start due at once, and their ends armed with the run as it started (what is delivered, made `lost`, if
 * this replica dies before the end); at its end, every armed end of the run (a push config added since included)
 * fired with the run as GET /runs/{id} then answers. A run refused before its agent started is told to its caller by
 * its own answer, and to no receiver but a push added while it waited. Resolves once its ends are in the outbox.
 */
export function deliverRunWebhooks(run: Run, options: RunWebhooksOptions): Promise<void> {
  const { outbox, replica, due, pushBody, log } = options
  let added: Promise<unknown> = Promise.resolve()
  return new Promise((resolve) => {
    run.on('phase', () => {
      if (run.phase === 'running') {
        added = startDeliveries(run, replica, pushBody).then(async (deliveries) => {
          if (deliveries.length === 0) return
          await outbox.addDeliveries(deliveries)
          due()
        }).catch((error: unknown) => {
          log.error({ err: error, run: run.id }, 'the run’s webhook deliveries could not be stored: none is sent')
        })
      } else if (run.phase === 'handed_over') {
        // Its worker fires its ends, at its end.
        resolve(added.then(() => undefined))
      } else if (isEnd(run.phase)) {
        resolve(added.then(async () => {
          if (await fireEnds(outbox, run.id, stateOf(run.snapshot()), pushBody)) due()
        }).catch((error: unknown) => {
          log.error({ err: error, run: run.id }, 'the run’s end could not be given to its webhook')
        }))
      }
    })
  })
}

async function startDeliveries(run: Run, replica: string, pushBody: PushBody): Promise<WebhookDelivery[]> {
  const state = stateOf(run.snapshot())
  return [
    ...(run.webhook === undefined ? [] : webhookDeliveries(run.webhook, state, replica)),
    ...(run.push === undefined ? [] : await pushDeliveries(run.push, state, { caller: run.caller, replica }, pushBody))
  ]
}

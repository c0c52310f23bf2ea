import t from 'tap'
import { MemorySlotLimiter, type SlotLease } from '#src/slots/limiter.js'
import { SlotQueue, type QueueAnswer, type Stoppable } from '#src/slots/queue.js'

// The queue of runs waiting for a slot (issue 40, item 1), over the in-process limiter: first come first served,
// each wait ended by a slot, its time, or its run's stop; the limit never exceeded.

const leaseOf = (answer: QueueAnswer): SlotLease => {
  if (!('lease' in answer)) throw new Error(`refused: ${answer.refused}`)
  return answer.lease
}

/** A run's stop as the queue sees it, from a signal. */
const stopOf = (signal = new AbortController().signal): Stoppable => ({
  get stopped() { return signal.aborted },
  signal
})

function queueOf(limit: number, maxQueued = 10) {
  const slots = new MemorySlotLimiter({ tool: limit })
  return { slots, queue: new SlotQueue(slots, { tool: maxQueued }) }
}

/** A run that waits: its answer to come, and each place it was told, once it has found its place. */
async function waiting(queue: SlotQueue, waitMs = 60_000, signal = new AbortController().signal) {
  const positions: number[] = []
  const onPosition = (position: number): number => positions.push(position)
  const answer = queue.acquire('tool', { waitMs, stop: stopOf(signal), onPosition })
  await new Promise((resolve) => setImmediate(resolve))
  return { answer, positions }
}

t.test('a full tool: no wait asked is refused at once; waiters get each freed slot in the order they came, ' +
  'told their place as it changes', async (t) => {
  const { slots, queue } = queueOf(1)
  const first = leaseOf(await queue.acquire('tool', { waitMs: 0, stop: stopOf() }))
  t.same(await queue.acquire('tool', { waitMs: 0, stop: stopOf() }), { refused: 'full' })
  const a = await waiting(queue)
  const b = await waiting(queue)
  const c = await waiting(queue)
  t.equal(queue.queued('tool'), 3)
  t.same([a.positions, b.positions, c.positions], [[1], [2], [3]])
  t.same(
    await queue.acquire('tool', { waitMs: 0, stop: stopOf() }), { refused: 'full' },
    'a newcomer never passes those waiting'
  )
  first.release()
  const second = leaseOf(await a.answer)
  t.same([b.positions, c.positions], [[2, 1], [3, 2]], 'each moved up one place')
  t.equal(slots.inUse('tool'), 1, 'the slot went from one run to the next: never two')
  second.release()
  leaseOf(await b.answer).release()
  leaseOf(await c.answer).release()
  t.same(c.positions, [3, 2, 1])
  t.equal(slots.inUse('tool'), 0)
  t.equal(queue.queued('tool'), 0)
})

t.test('a wait ends with its time or its run’s stop: it leaves its place, the others move up, no slot is taken',
  async (t) => {
    const { slots, queue } = queueOf(1)
    const held = leaseOf(await queue.acquire('tool', { waitMs: 0, stop: stopOf() }))
    const stop = new AbortController()
    const stopped = await waiting(queue, 60_000, stop.signal)
    const timed = await waiting(queue, 30)
    const last = await waiting(queue)
    t.same(await timed.answer, { refused: 'timed_out' })
    t.same(last.positions, [3, 2], 'moved up as the timed-out one left')
    stop.abort('cancelled')
    t.same(await stopped.answer, { refused: 'stopped' })
    t.same(last.positions, [3, 2, 1])
    held.release()
    leaseOf(await last.answer).release()
    t.equal(slots.inUse('tool'), 0)
    t.same(
      await queue.acquire('tool', { waitMs: 1000, stop: stopOf(AbortSignal.abort()) }), { refused: 'stopped' },
      'a run stopped before it asks waits for nothing'
    )
  })

t.test('at most MAX_QUEUED_<AGENT> wait: the next is refused at once', async (t) => {
  const { queue } = queueOf(1, 2)
  const held = leaseOf(await queue.acquire('tool', { waitMs: 0, stop: stopOf() }))
  const a = await waiting(queue)
  const b = await waiting(queue)
  const refused = await queue.acquire('tool', { waitMs: 60_000, stop: stopOf() })
  t.same(refused, { refused: 'queue_full' })
  held.release()
  leaseOf(await a.answer).release()
  leaseOf(await b.answer).release()
})

t.test('a slot freed on another replica goes to the longest waiting here, found by asking again, never to a newcomer',
  async (t) => {
    const shared = new MemorySlotLimiter({ tool: 1 })
    const queue = new SlotQueue(shared, { tool: 10 })
    // Another replica's run holds the slot: its release never passes through this queue.
    const elsewhere = (await shared.acquire('tool'))!
    const waiter = await waiting(queue)
    elsewhere.release()
    t.same(
      await queue.acquire('tool', { waitMs: 0, stop: stopOf() }), { refused: 'full' },
      'the newcomer does not take the slot the waiter is owed'
    )
    leaseOf(await waiter.answer).release()
    t.equal(shared.inUse('tool'), 0)
  })

t.test('a slot heard freed elsewhere while the queue is asking for one is asked for again, not left to the next try',
  async (t) => {
    const shared = new MemorySlotLimiter({ tool: 1 })
    let heard: (tool: string) => void = () => undefined
    let calls = 0
    let asking!: () => void
    const asked = new Promise<void>((resolve) => { asking = resolve })
    let answer!: () => void
    const answered = new Promise<void>((resolve) => { answer = resolve })
    // Its answer a round trip away: the queue's second question (its pass for the run waiting) is read, then held.
    const remote = Object.assign(Object.create(shared) as MemorySlotLimiter, {
      acquire: async (tool: string) => {
        const lease = await shared.acquire(tool)
        if (++calls === 2) {
          asking()
          await answered
        }
        return lease
      },
      onFreedElsewhere: (listener: (tool: string) => void) => { heard = listener }
    })
    // Never asking again while the test lasts: only being told can serve the run waiting here.
    const queue = new SlotQueue(remote, { tool: 10 }, { retryEveryMs: 3_600_000 })
    const elsewhere = (await shared.acquire('tool'))!
    const waiter = await waiting(queue)
    await asked
    elsewhere.release()
    heard('tool')
    answer()
    const served = await Promise.race([
      waiter.answer,
      new Promise<'not served'>((resolve) => setTimeout(() => { resolve('not served') }, 10_000).unref())
    ])
    t.not(served, 'not served', 'the waiting run got the slot')
    leaseOf(served as QueueAnswer).release()
  })

t.test('a run stopped while the limiter answers (a shared one, a round trip away) waits for nothing', async (t) => {
  const memory = new MemorySlotLimiter({ tool: 1 })
  await memory.acquire('tool')
  const stop = new AbortController()
  const slow = Object.assign(Object.create(memory) as MemorySlotLimiter, {
    acquire: async (tool: string) => {
      stop.abort('client_gone')
      return memory.acquire(tool)
    }
  })
  const queue = new SlotQueue(slow, { tool: 10 })
  t.same(await queue.acquire('tool', { waitMs: 60_000, stop: stopOf(stop.signal) }), { refused: 'stopped' })
  t.equal(queue.queued('tool'), 0)
})

t.test('only a run that waits makes its signal: one given a slot, or refused, at once never does', async (t) => {
  const { queue } = queueOf(1)
  let made = 0
  const counted = (): Stoppable => {
    const controller = new AbortController()
    return {
      stopped: false,
      get signal() {
        made++
        return controller.signal
      }
    }
  }
  const held = leaseOf(await queue.acquire('tool', { waitMs: 60_000, stop: counted() }))
  t.same(await queue.acquire('tool', { waitMs: 0, stop: counted() }), { refused: 'full' })
  t.equal(made, 0, 'neither the slot given nor the refusal made a signal')
  const waiter = queue.acquire('tool', { waitMs: 60_000, stop: counted() })
  await new Promise((resolve) => setImmediate(resolve))
  t.equal(made, 1, 'the waiter made its own, to be taken out of the queue if it stops')
  held.release()
  leaseOf(await waiter).release()
})

t.test('a process’s own count: no slot to adopt; a lease handed off is held here no more, given back once',
  async (t) => {
    const slots = new MemorySlotLimiter({ tool: 1 })
    t.equal(await slots.adopt(), null, 'nothing another process took can be adopted here')
    const lease = (await slots.acquire('tool'))!
    t.equal(lease.holder, null, 'no name to hand it over by')
    lease.handOff()
    t.equal(slots.inUse('tool'), 0, 'handed off: not held here')
    const next = (await slots.acquire('tool'))!
    lease.release()
    t.equal(slots.inUse('tool'), 1, 'the first lease, released after its hand-off, gives back nothing more')
    next.release()
  })

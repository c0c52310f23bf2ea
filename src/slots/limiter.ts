import type { SlotsHealth } from '../schemas/health.js'

/** A held agent slot. release() may be called any number of times; only the first gives the slot back. */
export interface SlotLease {
  release(): void
  /**
   * Its name for whoever takes it over (a fleet's worker adopts the slot its run was admitted with), null where it
   * cannot change hands (a process's own count).
   */
  readonly holder: string | null
  /** Stops renewing it here, without giving it back: its adopter renews and releases it from now on. */
  handOff(): void
}

/**
 * The seed's AcquireAgentSlot: a per-tool count of running agents, in this process or shared by a fleet (Redis).
 * Acquiring never waits for a slot to free up: a full tool answers 429 at once.
 */
export interface SlotLimiter {
  /** A lease, or null when the tool's limit is reached. Throws SlotsUnavailable when the count cannot be reached. */
  acquire(tool: string): Promise<SlotLease | null>
  /**
   * The slot another process took and handed off (`SlotLease.holder`), renewed and released here from now on; null
   * when it is no longer held (its TTL passed) or cannot change hands here.
   */
  adopt(tool: string, holder: string): Promise<SlotLease | null>
  /**
   * Tells `listener` each time a slot of a tool is given back by any process sharing the limit (a fleet: this one
   * too), so that runs waiting here need not wait to ask again. Absent where every slot is this process's own.
   */
  onFreedElsewhere?(listener: (tool: string) => void): void
  limit(tool: string): number
  /** Slots this replica holds now (what its own gauge reports). */
  inUse(tool: string): number
  /** Slots held by every replica sharing the limit. */
  usage(tool: string): Promise<number>
  health(): Promise<SlotsHealth>
  close(): Promise<void>
}

/**
 * Gives back once, whatever calls it how often; handed off, it is never given back here (its adopter does), and
 * whichever came first, the other does nothing.
 */
export function leaseOnce(
  giveBack: () => void, holder: string | null = null, handOff: () => void = giveBack
): SlotLease {
  let done = false
  const once = (what: () => void) => () => {
    if (done) return
    done = true
    what()
  }
  return { holder, release: once(giveBack), handOff: once(handOff) }
}

export function limitFor(limits: ReadonlyMap<string, number>, tool: string): number {
  const limit = limits.get(tool)
  if (limit === undefined) throw new Error(`no slot limit configured for ${tool}`)
  return limit
}

export class MemorySlotLimiter implements SlotLimiter {
  readonly #limits: ReadonlyMap<string, number>
  readonly #inUse = new Map<string, number>()

  constructor(limits: Record<string, number>) {
    this.#limits = new Map(Object.entries(limits))
  }

  limit(tool: string): number {
    return limitFor(this.#limits, tool)
  }

  inUse(tool: string): number {
    return this.#inUse.get(tool) ?? 0
  }

  async usage(tool: string): Promise<number> {
    return this.inUse(tool)
  }

  async health(): Promise<SlotsHealth> {
    return { backend: 'memory', ok: true }
  }

  async close(): Promise<void> {}

  async adopt(): Promise<SlotLease | null> {
    return null
  }

  async acquire(tool: string): Promise<SlotLease | null> {
    const held = this.inUse(tool)
    if (held >= this.limit(tool)) return null
    this.#inUse.set(tool, held + 1)
    return leaseOnce(() => this.#inUse.set(tool, this.inUse(tool) - 1))
  }
}

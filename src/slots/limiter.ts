/** A held agent slot. release() may be called any number of times; only the first gives the slot back. */
export interface SlotLease {
  release(): void
}

/**
 * AcquireAgentSlot: a per-tool count of running agents. Asynchronous so that a shared backend (Redis) can stand in
 * for the in-memory one without touching the routes.
 */
export interface SlotLimiter {
  /** A lease, or null when the tool's limit is reached. Never waits for a slot to free up. */
  acquire(tool: string): Promise<SlotLease | null>
  inUse(tool: string): number
  limit(tool: string): number
}

export class MemorySlotLimiter implements SlotLimiter {
  readonly #limits: ReadonlyMap<string, number>
  readonly #inUse = new Map<string, number>()

  constructor(limits: Record<string, number>) {
    this.#limits = new Map(Object.entries(limits))
  }

  limit(tool: string): number {
    const limit = this.#limits.get(tool)
    if (limit === undefined) throw new Error(`no slot limit configured for ${tool}`)
    return limit
  }

  inUse(tool: string): number {
    return this.#inUse.get(tool) ?? 0
  }

  async acquire(tool: string): Promise<SlotLease | null> {
    const held = this.inUse(tool)
    if (held >= this.limit(tool)) return null
    this.#inUse.set(tool, held + 1)
    let released = false
    return {
      release: () => {
        if (released) return
        released = true
        this.#inUse.set(tool, this.inUse(tool) - 1)
      }
    }
  }
}

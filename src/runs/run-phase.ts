/**
 * Where a run is in its life. Before `running` no agent exists and a stop means nothing starts; from `running` on an
 * agent exists and a stop means stopping it. The last four are ends: `finished` carries a result (whose status says
 * succeeded, failed, timed_out or cancelled), `refused` ended before any agent started (the caller got a 4xx or
 * 503), `failed` lost its agent's result after the agent had started, `handed_over` went to a fleet's worker, which
 * runs it and records it from then on (this replica only admitted it). `lost` is no phase of a run held in memory: it
 * is what the store says of a run whose service died under it.
 */
export const RUN_PHASES = [
  'opened',
  'placed',
  'waiting_for_slot',
  'starting',
  'running',
  'stopping',
  'finished',
  'refused',
  'failed',
  'handed_over'
] as const
export type RunPhase = (typeof RUN_PHASES)[number]

/** Who may move a run out of each phase, and where to (docs/architecture.md draws it). */
export const TRANSITIONS: Readonly<Record<RunPhase, readonly RunPhase[]>> = {
  opened: ['placed', 'refused'],
  placed: ['waiting_for_slot', 'refused'],
  waiting_for_slot: ['starting', 'refused'],
  starting: ['running', 'refused', 'handed_over'],
  running: ['stopping', 'finished', 'failed'],
  stopping: ['finished', 'failed'],
  finished: [],
  refused: [],
  failed: [],
  handed_over: []
}

export const isEnd = (phase: RunPhase): boolean => TRANSITIONS[phase].length === 0

/** An agent of this run exists: it holds a slot, shows in GET /runs, and a stop must end it. */
export const hasAgent = (phase: RunPhase): boolean => phase === 'running' || phase === 'stopping'

export class IllegalTransition extends Error {
  constructor(from: RunPhase, to: RunPhase) {
    super(`a run cannot move from ${from} to ${to}`)
    this.name = 'IllegalTransition'
  }
}

/** The phase after `from` when asked for `to`; throws when the table does not allow it (a bug, never a caller's). */
export function nextPhase(from: RunPhase, to: RunPhase): RunPhase {
  if (!TRANSITIONS[from].includes(to)) throw new IllegalTransition(from, to)
  return to
}

import type { Step } from '../../schemas/steps.js'
import { head, tail } from './step-text.js'

type Change = 'created' | 'edited' | 'deleted' | null

/** What a tool call is, once its name and input are read: a command, a file change, or any other tool. */
export type Call =
  | { kind: 'command'; command: string }
  | { kind: 'file_change'; tool: string; path: string; change: Change }
  | { kind: 'tool'; name: string; input: string }

export interface CallEnd {
  status: 'succeeded' | 'failed' | 'denied'
  exitCode?: number | null
  output?: string | null
  /** What the end tells that the start could not (claude's Write: created or updated). */
  change?: Change
}

function step(call: Call, callId: string, phase: 'started' | 'completed', end: CallEnd | undefined): Step {
  const status = end?.status ?? 'running'
  switch (call.kind) {
    case 'command':
      return {
        kind: 'command',
        phase,
        call_id: callId,
        command: head(call.command).text,
        status,
        exit_code: end?.exitCode ?? null,
        output: end?.output === undefined || end.output === null ? null : tail(end.output)
      }
    case 'file_change':
      return { ...call, phase, call_id: callId, change: end?.change ?? call.change, status }
    case 'tool':
      return { ...call, phase, call_id: callId, status }
  }
}

export const started = (call: Call, callId: string): Step => step(call, callId, 'started', undefined)

export const completed = (call: Call, callId: string, end: CallEnd): Step => step(call, callId, 'completed', end)

/** A call a CLI reports only once it has ended: its start and its end at once, so that every end has its start. */
export const startedAndCompleted = (call: Call, callId: string, end: CallEnd): Step[] =>
  [started(call, callId), completed(call, callId, end)]

/** Calls open at once in one run, at most: a CLI that never ends its calls cannot grow the map for good. */
const OPEN_CALLS_MAX = 256

/** Calls started and not yet ended, by the CLI's id, for CLIs whose end does not repeat what the call was. */
export class OpenCalls {
  readonly #calls = new Map<string, Call>()

  open(callId: string, call: Call): Step {
    this.#calls.set(callId, call)
    if (this.#calls.size > OPEN_CALLS_MAX) this.#calls.delete(this.#calls.keys().next().value!)
    return started(call, callId)
  }

  /** The call's end; nothing for an id never started (or forgotten). */
  close(callId: string, end: CallEnd): Step[] {
    const call = this.#calls.get(callId)
    if (call === undefined) return []
    this.#calls.delete(callId)
    return [completed(call, callId, end)]
  }
}

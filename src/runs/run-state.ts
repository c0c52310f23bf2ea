import type { RunState } from '../schemas/runs.js'
import type { RunKind } from './run.js'
import type { RunRecord } from './stores/run-store.js'

/** The one mapping of a run to what the API says of it (and its webhooks carry): a stored record is an async run's. */
export function stateOf(found: Omit<RunRecord, 'replica' | 'kind'> & { kind?: RunKind | undefined }): RunState {
  return {
    id: found.id,
    tool: found.tool,
    kind: found.kind ?? 'async',
    status: found.status,
    caller: found.caller,
    task: found.task ?? null,
    created_at: found.createdAt,
    deadline: found.deadline ?? null,
    finished_at: found.finishedAt,
    ...(found.webhook === undefined ? {} : { webhook: found.webhook }),
    ...(found.workspace === undefined ? {} : { workspace: found.workspace }),
    ...(found.model === undefined ? {} : { model: found.model }),
    ...(found.limits === undefined ? {} : { limits: found.limits }),
    ...(found.context === undefined ? {} : { context_id: found.context }),
    ...(found.queuePosition === undefined ? {} : { queue_position: found.queuePosition }),
    ...(found.error === undefined ? {} : { error: found.error }),
    result: found.result
  }
}

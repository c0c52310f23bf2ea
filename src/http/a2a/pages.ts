import { TaskState, type ListTasksRequest } from '@a2a-js/sdk'
import { RequestMalformedError } from '@a2a-js/sdk/errors'
import type { RunSummary } from '../../schemas/runs.js'
import { contextOf, taskStateOf } from './tasks.js'

/** A2A's default page (ListTasks without pageSize). */
const DEFAULT_PAGE_SIZE = 50
const MAX_PAGE_SIZE = 100

/**
 * Where the next page begins: the last task given, by the order runs are listed in (newest first, then id). A cursor
 * rather than an offset: a task started between two pages shifts no later page.
 */
interface Cursor { createdAt: string; id: string }

const encode = (cursor: Cursor): string =>
  Buffer.from(JSON.stringify([cursor.createdAt, cursor.id])).toString('base64url')

function decode(token: string): Cursor {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(token, 'base64url').toString()) as unknown[]
    if (typeof createdAt === 'string' && typeof id === 'string') return { createdAt, id }
  } catch {}
  throw new RequestMalformedError('pageToken is not one this service gave')
}

/** Whether a run comes after the cursor in the listing's order (created_at descending, then id descending). */
const after = (run: RunSummary, cursor: Cursor): boolean =>
  run.created_at < cursor.createdAt || (run.created_at === cursor.createdAt && run.id < cursor.id)

const byListing = (a: RunSummary, b: RunSummary): number =>
  b.created_at.localeCompare(a.created_at) || b.id.localeCompare(a.id)

/** One page of a caller's runs as ListTasks asks for it: filtered by state, context and time, then cut. */
export function pageOf(runs: RunSummary[], params: ListTasksRequest) {
  const pageSize = params.pageSize ?? DEFAULT_PAGE_SIZE
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE_SIZE) {
    throw new RequestMalformedError(`pageSize must be between 1 and ${String(MAX_PAGE_SIZE)}`)
  }
  const since = params.statusTimestampAfter === undefined ? undefined : Date.parse(params.statusTimestampAfter)
  if (Number.isNaN(since)) throw new RequestMalformedError('statusTimestampAfter is not an ISO 8601 timestamp')
  const matching = runs
    .filter((run) => params.status === TaskState.TASK_STATE_UNSPECIFIED ||
      taskStateOf({ ...run, result: null }) === params.status)
    .filter((run) => params.contextId === '' || contextOf(run) === params.contextId)
    .filter((run) => since === undefined || Date.parse(run.finished_at ?? run.created_at) >= since)
    .sort(byListing)
  const rest = params.pageToken === '' ? matching : matching.filter((run) => after(run, decode(params.pageToken)))
  const page = rest.slice(0, pageSize)
  const last = page.at(-1)
  const more = rest.length > pageSize && last !== undefined
  const nextPageToken = more ? encode({ createdAt: last.created_at, id: last.id }) : ''
  return { runs: page, nextPageToken, pageSize, totalSize: matching.length }
}

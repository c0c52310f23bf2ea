import { serviceError } from '../errors.js'
import type { RunParams, RunResult } from '../schemas/run.js'
import type { SessionRecord, SessionWorktree } from './stores/run-store.js'

/** The placement fields a session keeps, as a request names them and as the session record does. */
const PLACE_FIELDS = [['cwd', 'cwd'], ['wsl_distro', 'wslDistro'], ['wsl_user', 'wslUser']] as const

/**
 * The request, placed where its session ran: a session continues there (a CLI keys its sessions by directory and
 * user), so a field left out is the session's and one given must be the same.
 */
export function continuedPlace(params: RunParams, session: SessionRecord): RunParams {
  for (const [field, kept] of PLACE_FIELDS) {
    const given = params[field]
    const was = session[kept]
    if (given !== undefined && given !== was) {
      throw serviceError('RESUME_PLACE_MISMATCH', field, given, was ?? '(the default)')
    }
  }
  const { cwd: _cwd, wsl_distro: _distro, wsl_user: _user, ...rest } = params
  return {
    ...rest,
    ...(session.cwd === null ? {} : { cwd: session.cwd }),
    ...(session.wslDistro === null ? {} : { wsl_distro: session.wslDistro }),
    ...(session.wslUser === null ? {} : { wsl_user: session.wslUser })
  }
}

/** What a run's result tells of the session it leaves, for whoever continues it next; null when it reported none. */
export function sessionLeftBy(
  result: RunResult,
  run: { tool: string; caller: string; params: RunParams; worktree?: SessionWorktree | undefined },
  now = new Date()
): SessionRecord | null {
  if (result.session_id === null) return null
  const { tool, caller, params, worktree } = run
  return {
    id: result.session_id,
    tool,
    caller,
    cwd: params.cwd ?? null,
    wslDistro: params.wsl_distro ?? null,
    wslUser: params.wsl_user ?? null,
    updatedAt: now.toISOString(),
    ...(worktree === undefined ? {} : { worktree })
  }
}

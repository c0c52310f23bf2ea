/**
 * What a session id reported by an agent's CLI must look like before the service keeps it: an agent's output is data
 * it checks, never an authority (an agent could print another token's id, `latest`, or a megabyte).
 */
const SESSION_ID_MAX_CHARS = 128

/** claude, gemini and codex name their conversations with UUIDs (codex's are version 7). */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/**
 * opencode's: `ses_`, its creation time in 12 hex digits, then 14 base62 characters (1.18.33 prints
 * `ses_dce1285f3ffe0xs4bebTgxx2MR`); a little room for the marker newer versions put before the time.
 */
export const OPENCODE_SESSION = /^ses_[0-9A-Za-z]{26,28}$/

/**
 * The session id the run may leave: one in its CLI's format, and when it continued a session, that session's id
 * (the four CLIs keep it); null for anything else.
 */
export function acceptedSessionId(
  reported: string | null,
  format: RegExp | undefined,
  resumed: string | undefined
): string | null {
  if (reported === null || format === undefined) return null
  if (reported.length > SESSION_ID_MAX_CHARS || !format.test(reported)) return null
  if (resumed !== undefined && reported !== resumed) return null
  return reported
}

import t from 'tap'
import { acceptedSessionId, OPENCODE_SESSION, UUID } from '#src/agents/session-ids.js'
import { BUILT_IN_AGENTS } from '#src/agents/catalog.js'

// A session id is what an agent printed: kept only in its CLI's form (src/agents/session-ids.ts).

const claudeId = 'e86ba2de-839e-452f-b51a-497ba2c47c30'
const codexId = '01a231ed-300b-7671-b66e-bf5ac04942de'
const opencodeId = 'ses_dce1285f3ffe0xs4bebTgxx2MR'

t.test('each CLI’s own form, as the real ones print it, and nothing else', async (t) => {
  for (const id of [claudeId, codexId]) t.equal(acceptedSessionId(id, UUID, undefined), id)
  t.equal(acceptedSessionId(opencodeId, OPENCODE_SESSION, undefined), opencodeId)
  for (const id of [
    'latest', '1', 'my title', `${claudeId}\n`, claudeId.toUpperCase(), `-${claudeId}`, opencodeId, ''
  ]) {
    t.equal(acceptedSessionId(id, UUID, undefined), null, JSON.stringify(id))
  }
  for (const id of [claudeId, 'ses_', `ses_${'a'.repeat(200)}`, `--session=${opencodeId}`]) {
    t.equal(acceptedSessionId(id, OPENCODE_SESSION, undefined), null, id.slice(0, 40))
  }
  t.equal(acceptedSessionId(null, UUID, undefined), null)
  t.equal(acceptedSessionId(claudeId, undefined, undefined), null, 'a CLI that resumes nothing leaves no session')
})

t.test('a follow-up leaves the session it continued, never another', async (t) => {
  t.equal(acceptedSessionId(claudeId, UUID, claudeId), claudeId)
  t.equal(acceptedSessionId(codexId, UUID, claudeId), null)
})

t.test('every agent that continues sessions says what its ids look like', async (t) => {
  const formats = Object.fromEntries(BUILT_IN_AGENTS.map((spec) => [spec.agent, spec.resumes?.sessionId]))
  t.same(formats, { crush: undefined, claude: UUID, codex: UUID, gemini: UUID, opencode: OPENCODE_SESSION })
})

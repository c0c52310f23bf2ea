import t from 'tap'
import { continuedPlace, sessionLeftBy } from '#src/runs/sessions.js'
import type { RunResult } from '#src/schemas/run.js'

// Where a continued session runs, and what a run leaves for the next (src/runs/sessions.ts).

const session = {
  id: 's1',
  tool: 'claude_run',
  caller: 'alice',
  cwd: '/home/dev/p',
  wslDistro: 'Ubuntu',
  wslUser: 'dev',
  updatedAt: new Date().toISOString()
}

t.test('a follow-up runs where its session ran: what it leaves out is the session’s, ' +
  'what it gives must match', async (t) => {
  t.same(continuedPlace({ task: 'go on', timeout: 60, resume: 's1' }, session), {
    task: 'go on', timeout: 60, resume: 's1', cwd: '/home/dev/p', wsl_distro: 'Ubuntu', wsl_user: 'dev'
  })
  t.same(
    continuedPlace({ task: 'go on', timeout: 60, cwd: '/home/dev/p', wsl_distro: 'Ubuntu' }, session).wsl_user, 'dev'
  )
  t.throws(() => continuedPlace({ task: 'x', timeout: 60, wsl_distro: 'Debian' }, session), {
    code: 'RESUME_PLACE_MISMATCH',
    message: 'body/wsl_distro: the session ran with wsl_distro Ubuntu, not Debian; leave it out to continue there'
  })
  t.throws(() => continuedPlace({ task: 'x', timeout: 60, wsl_distro: 'Ubuntu', wsl_user: 'root' }, session), {
    code: 'RESUME_PLACE_MISMATCH'
  })
  const onHost = { ...session, cwd: null, wslDistro: null, wslUser: null }
  t.same(
    continuedPlace({ task: 'x', timeout: 60 }, onHost), { task: 'x', timeout: 60 },
    'the default place stays the default'
  )
  t.throws(() => continuedPlace({ task: 'x', timeout: 60, wsl_distro: 'Ubuntu' }, onHost), {
    code: 'RESUME_PLACE_MISMATCH', message: /with wsl_distro \(the default\)/
  })
})

t.test('a run leaves the session it reported, placed as it ran (in its worktree, when it had one); none when it ' +
  'reported none', async (t) => {
  const now = new Date('2026-12-01T00:00:00Z')
  const params = { task: 'x', timeout: 1, cwd: '/w' }
  const left = { id: 'abc', tool: 'codex_run', caller: 'bob', cwd: '/w', wslDistro: null, wslUser: null }
  t.same(
    sessionLeftBy({ session_id: 'abc' } as RunResult, { tool: 'codex_run', caller: 'bob', params }, now),
    { ...left, updatedAt: '2026-12-01T00:00:00.000Z' }
  )
  const worktree = {
    path: '/d/wt/1', gitDir: '/w/.git/worktrees/1', topLevel: '/w', commonDir: '/w/.git', base: 'b', prefix: ''
  }
  t.same(
    sessionLeftBy({ session_id: 'abc' } as RunResult, { tool: 'codex_run', caller: 'bob', params, worktree }, now),
    { ...left, updatedAt: '2026-12-01T00:00:00.000Z', worktree }
  )
  t.equal(
    sessionLeftBy({ session_id: null } as RunResult, { tool: 'crush_run', caller: 'bob', params }),
    null
  )
})

import { Type, type Static } from '@sinclair/typebox'

export const WorkspaceKind = Type.Union([Type.Literal('cwd'), Type.Literal('worktree')], {
  description:
    '`cwd` (default): the agent works in `cwd` itself. `worktree`: in a git worktree of its own, made at `base` from ' +
    'the repository `cwd` is in (the caller’s working tree, index and branches untouched); the result carries ' +
    '`changes`, what the agent changed there.'
})

export const WorkspaceKeep = Type.Union([Type.Literal('never'), Type.Literal('always')], {
  description:
    'Worktree runs: `never` (default) removes the worktree when the run ends, unless the agent left a session that ' +
    'may be resumed (it lives as long as that session); `always` leaves it for the caller (`result.changes.worktree`).'
})

/** A commit-ish as the caller names it: any name git may read, never an option (it follows --end-of-options). */
export const WorkspaceBase = Type.String({
  minLength: 1,
  maxLength: 256,
  pattern: '^[^\\x00-\\x1f\\x7f]+$',
  description:
    'Worktree runs: the commit the worktree starts from (a branch, tag, sha, `HEAD~2`…); default `HEAD`. Always read ' +
    'as a revision, never as an option.'
})

export const WorkspaceCommit = Type.Object(
  {
    branch: Type.Optional(Type.String({
      minLength: 1,
      maxLength: 200,
      description:
        'The new branch (default `agent-runner/<run id>`): a valid branch name that does not exist yet (else 400 ' +
        '`INVALID_BRANCH_NAME`, 409 `BRANCH_EXISTS`).'
    })),
    message: Type.Optional(Type.String({
      minLength: 1,
      maxLength: 10_000,
      pattern: '^[^\\x00]+$',
      description: 'The commit message (default `agent-runner: run <run id>`).'
    }))
  },
  {
    additionalProperties: false,
    description:
      'Worktree runs: when the agent ends, what it changed is committed (author WORKSPACE_COMMIT_AUTHOR, no hook, no ' +
      'signing) on a new branch of the caller’s repository: `changes.branch` and `changes.head`.'
  }
)

const ChangedFile = Type.Object({
  path: Type.String(),
  status: Type.Union([
    Type.Literal('added'), Type.Literal('modified'), Type.Literal('deleted'), Type.Literal('renamed')
  ]),
  old_path: Type.Optional(Type.String({ description: 'A renamed file’s path at `base`.' })),
  additions: Type.Integer({ description: 'Lines added (0 for a binary file).' }),
  deletions: Type.Integer({ description: 'Lines deleted (0 for a binary file).' }),
  binary: Type.Boolean()
})

export const Changes = Type.Object(
  {
    base: Type.String({ description: 'The commit the worktree started from (full sha).' }),
    head: Type.Union([Type.String(), Type.Null()], {
      description:
        'With `commit`: the branch’s commit. Else the worktree’s HEAD when the agent committed itself, or null.'
    }),
    branch: Type.Union([Type.String(), Type.Null()], { description: 'The branch `commit` made; null without.' }),
    files: Type.Array(ChangedFile, {
      description:
        'Every file that differs from `base`, committed by the agent or not, tracked or not (ignored ones left out).'
    }),
    diff: Type.String({
      description: 'The unified diff against `base`, at most WORKSPACE_DIFF_LIMIT_BYTES (cut at a line’s end).'
    }),
    diff_bytes: Type.Integer({ description: 'The whole diff’s size: GET /runs/{id}/diff serves it.' }),
    diff_truncated: Type.Boolean(),
    worktree: Type.Union([Type.String(), Type.Null()], {
      description:
        'Where the worktree is, while it is kept (`keep: "always"`, or a session to resume); null once removed.'
    }),
    error: Type.Optional(Type.String({
      description: 'What could not be done after the agent ended (the changeset read, or the commit made).'
    }))
  },
  { description: 'What a worktree run changed, against its base.' }
)
export type Changes = Static<typeof Changes>

export const RunWorkspace = Type.Object({
  kind: Type.Literal('worktree'),
  path: Type.String({ description: 'The worktree the agent works in.' }),
  base: Type.String({ description: 'The commit it was made at.' })
}, { description: 'Worktree runs: where the agent works.' })
export type RunWorkspace = Static<typeof RunWorkspace>

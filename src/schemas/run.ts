import { Type, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { RunLimits } from './limits.js'
import { RunUsage, StepsSummary } from './steps.js'
import { RunWebhook } from './webhooks.js'
import { Changes, WorkspaceBase, WorkspaceCommit, WorkspaceKeep, WorkspaceKind } from './workspace.js'

/**
 * Linux refuses a single argv string over 128 KiB (MAX_ARG_STRLEN). A character takes at most 4 bytes in UTF-8, so
 * 30,000 characters stay under 120,000 bytes whatever the script.
 */
export const TASK_MAX_CHARS = 30_000
export const TIMEOUT_MAX_SECONDS = 1800
const QUEUE_TIMEOUT_MAX_SECONDS = 1800

// Never a leading `-`: wsl.exe would read the name as one of its options.
const WslName = (description: string) =>
  Type.String({ pattern: '^[a-zA-Z0-9._][a-zA-Z0-9._-]*$', maxLength: 64, description })

/**
 * A model's name as the CLIs spell them (`sonnet`, `gpt-5.1-codex`, `anthropic/claude-sonnet-4-5`, `name:tag`,
 * `model@version`), at most 128 characters: never a leading `-`, nor a blank, a quote or anything a shell reads.
 */
export const MODEL_PATTERN = '^[A-Za-z0-9._:/@][A-Za-z0-9._:/@-]{0,127}$'

const eventsChoice = (description: string) =>
  Type.Union([Type.Literal('both'), Type.Literal('steps'), Type.Literal('output')], { description })

export const EventsChoice = eventsChoice(
  'What a stream of the run carries: `step` events (what the agent does, for the agents that report it), its raw ' +
    '`output`, or both. The result always ends the stream.'
)
export type EventsChoice = Static<typeof EventsChoice>

export const RunParams = Type.Object(
  {
    task: Type.String({
      minLength: 1,
      maxLength: TASK_MAX_CHARS,
      // Not only blanks (every CLI refuses an empty prompt, after a start for nothing), and no NUL byte (an argv
      // element cannot hold one: crush's task is one). \s* then a character that is no blank: no backtracking.
      // \x00, not \u0000: the same in every regex dialect (Perl and PCRE read \u as a letter).
      pattern: '^\\s*[^\\s\\x00][^\\x00]*$',
      description:
        'The prompt for the agent, byte for byte: on its standard input (crush: as one argv element, after `--`); ' +
        `not only blanks, at most ${TASK_MAX_CHARS} characters.`
    }),
    timeout: Type.Integer({
      minimum: 1,
      maximum: TIMEOUT_MAX_SECONDS,
      default: TIMEOUT_MAX_SECONDS,
      description: 'Seconds before the agent and all its processes are stopped.'
    }),
    cwd: Type.Optional(
      Type.String({
        minLength: 1,
        pattern: '^(/|[A-Za-z]:[\\\\/])[^\\x00]*$',
        description:
          'Absolute working directory. Outside WSL it must exist on the host; with wsl_distro it is a path inside ' +
          'the distro.'
      })
    ),
    wsl_distro: Type.Optional(WslName('Windows hosts only: run the agent inside this WSL distro.')),
    wsl_user: Type.Optional(
      WslName('Windows hosts only: the distro user (the distro default otherwise). Requires wsl_distro.')
    ),
    resume: Type.Optional(
      Type.String({
        pattern: '^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$',
        description:
          'Continue the agent’s session with this task: a `session_id` an earlier run of the same tool with the same ' +
          'token answered with. The run takes that session’s place (its `cwd`, WSL distro and user; any given must ' +
          'match) and the agent keeps its conversation.'
      })
    ),
    model: Type.Optional(
      Type.String({
        pattern: MODEL_PATTERN,
        description:
          'The model the agent uses, given to its CLI joined to its flag (`--model=<model>`): a name or alias the ' +
          'CLI knows (opencode: `provider/model`; crush: a model or `provider/model`). One of the tool’s ' +
          '`<AGENT>_MODELS` when the operator set them (else 400 `MODEL_NOT_ALLOWED`); default `<AGENT>_MODEL`, else ' +
          'the CLI’s own choice. The model the CLI says it used is the result’s `usage.model`.'
      })
    ),
    events: Type.Optional(
      eventsChoice(
        'Streamed runs (NDJSON, SSE) and MCP progress: what the stream carries, `step` events, the raw `output` or ' +
          'both. Default: both for streams; for MCP progress, steps when the agent reports them (readable lines), ' +
          'else the output. Async runs choose when they are followed (GET /runs/{id}/events?events=).'
      )
    ),
    queue_timeout: Type.Optional(Type.Integer({
      minimum: 0,
      maximum: QUEUE_TIMEOUT_MAX_SECONDS,
      description:
        'Seconds the run may wait for a slot of its tool when all are taken, first come first served (at most ' +
        '`MAX_QUEUED_<AGENT>` wait per tool). 0 (default): a full tool answers 429 `AGENT_LIMIT_REACHED` at once. ' +
        'Its wait over, 429 `QUEUE_TIMED_OUT`. The agent’s `timeout` starts when it starts.'
    })),
    limits: Type.Optional(RunLimits),
    output_schema: Type.Optional(Type.Object({}, {
      additionalProperties: true,
      description:
        'A JSON Schema (2020-12, at most 64 KiB) the agent’s answer must end with an object of: the agent is asked ' +
        'so after its task, and the result carries `structured_output`, or `ok: false` with `error.code` ' +
        '`OUTPUT_SCHEMA_MISMATCH`. A schema Ajv (strict) cannot compile is 400 `BAD_OUTPUT_SCHEMA`.'
    })),
    webhook: Type.Optional(RunWebhook),
    workspace: Type.Optional(WorkspaceKind),
    base: Type.Optional(WorkspaceBase),
    keep: Type.Optional(WorkspaceKeep),
    commit: Type.Optional(WorkspaceCommit)
  },
  {
    $id: 'RunParams',
    title: 'RunParams',
    description: 'What to run: the task, and optionally where and for how long.',
    additionalProperties: false,
    dependencies: { wsl_user: ['wsl_distro'] },
    examples: [{ task: 'List the TODO comments in this repository', cwd: '/srv/project', timeout: 600 }]
  }
)
export type RunParams = Static<typeof RunParams>

export const AgentReport = Type.Object(
  {
    is_error: Type.Boolean(),
    subtype: Type.Optional(Type.String()),
    session_id: Type.Optional(Type.String()),
    // null: the agent wrote a number JSON cannot carry back (1e400, an integer past 2^53).
    num_turns: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
    total_cost_usd: Type.Optional(Type.Union([Type.Number(), Type.Null()])),
    duration_ms: Type.Optional(Type.Union([Type.Number(), Type.Null()])),
    duration_api_ms: Type.Optional(Type.Union([Type.Number(), Type.Null()]))
  },
  { description: "What the agent reported about its own run (claude's JSON report)." }
)
export type AgentReport = Static<typeof AgentReport>

export const StopReason = Type.Union([
  Type.Literal('timeout'), Type.Literal('client_gone'), Type.Literal('shutdown'), Type.Literal('cancelled'),
  // The run crossed a limit of its cgroup (AGENT_MAX_PROCESSES, AGENT_MAX_MEMORY_MB), and was stopped as a deadline
  // stops one.
  Type.Literal('process_limit'), Type.Literal('memory_limit'),
  // The run crossed one of its `limits` (or its tool's ceiling): stopped the same way, or stopped by its CLI itself
  // where the limit was passed to it (claude's --max-turns, --max-budget-usd).
  Type.Literal('max_turns'), Type.Literal('max_tokens'), Type.Literal('max_cost')
])
export type StopReason = Static<typeof StopReason>

export const SudoStatus = Type.Union(
  [
    Type.Literal('passwordless'),
    Type.Literal('password_required'),
    Type.Literal('not_installed'),
    Type.Literal('unknown_user')
  ],
  {
    description:
      'Whether sudo works without a password where the agent runs (probed before the run, cached); ' +
      '`unknown_user`: sudo refuses the agent’s uid outright, which has no passwd entry (a token’s own user).'
  }
)
export type SudoStatus = Static<typeof SudoStatus>

export const SudoReport = Type.Object({
  status: SudoStatus,
  password_needed: Type.Boolean({
    description: 'The agent ran sudo during this run and sudo refused for want of a password.'
  }),
  message: Type.Union(
    [Type.String(), Type.Null()],
    { description: 'What to do about it, in French; null when nothing happened.' }
  )
})
export type SudoReport = Static<typeof SudoReport>

export const StructuredOutputError = Type.Object({
  code: Type.Literal('OUTPUT_SCHEMA_MISMATCH'),
  message: Type.String(),
  schema_errors: Type.Array(Type.Object({
    instance_path: Type.String({ description: 'Where in the object (JSON Pointer; empty: the object itself).' }),
    message: Type.String()
  }), { description: 'Ajv’s first errors (at most five).' })
}, { description: 'The answer missed `output_schema`: it ends with no JSON object, or one that does not validate.' })
export type StructuredOutputError = Static<typeof StructuredOutputError>

export const RunResult = Type.Object({
  tool: Type.String(),
  ok: Type.Boolean({
    description: 'Exit code 0, not stopped, no error reported by the agent, and not every tool call it made refused.'
  }),
  exit_code: Type.Union([Type.Integer(), Type.Null()], { description: 'null when a signal ended the agent' }),
  signal: Type.Union([Type.String(), Type.Null()]),
  timed_out: Type.Boolean(),
  stop_reason: Type.Union([StopReason, Type.Null()], { description: 'Why the service stopped the agent, if it did.' }),
  duration_ms: Type.Integer(),
  output: Type.String({ description: "stdout and stderr merged in arrival order (claude: the report's answer text)." }),
  output_truncated: Type.Boolean(),
  output_bytes: Type.Integer({ description: 'Bytes the agent wrote in all, including any left out of output.' }),
  command: Type.Array(Type.String(), { description: 'The argv that ran.' }),
  agent_report: Type.Union([AgentReport, Type.Null()]),
  sudo: SudoReport,
  session_id: Type.Union([Type.String(), Type.Null()], {
    // Results stored before this field existed read back as null (resultFromStore), as the next two.
    default: null,
    description: 'The CLI’s id of the conversation, when it reported one in its structured output.'
  }),
  usage: Type.Union([RunUsage, Type.Null()], { default: null, description: 'null: the CLI reported none.' }),
  steps_summary: Type.Union([StepsSummary, Type.Null()], {
    default: null,
    description: 'null for an agent whose output is plain text (crush).'
  }),
  structured_output: Type.Unknown({
    default: null,
    description: 'With `output_schema`: the JSON object the answer ended with, once it validated; null otherwise.'
  }),
  error: Type.Union([StructuredOutputError, Type.Null()], {
    default: null,
    description: 'Why the run is not ok beyond its agent’s own end: its answer missed `output_schema`.'
  }),
  changes: Type.Union([Changes, Type.Null()], {
    default: null,
    description: 'Worktree runs: what the agent changed (files, diff, branch); null for a run in `cwd`.'
  }),
  processes_may_remain: Type.Boolean({
    // Results stored before this field existed read back as false (resultFromStore).
    default: false,
    description:
      'The containment could not stop the run (a failed taskkill or wsl.exe call): the agent itself was ended ' +
      'directly, and processes it started may still run.'
  })
}, {
  $id: 'RunResult',
  title: 'RunResult',
  description:
    'A run that started, whatever its end: ok, exit code or signal, why it was stopped, and what the agent said.',
  examples: [
    {
      tool: 'claude_run',
      ok: true,
      exit_code: 0,
      signal: null,
      timed_out: false,
      stop_reason: null,
      duration_ms: 8123,
      output: 'src/app.ts builds the Fastify application…',
      output_truncated: false,
      output_bytes: 912,
      command: [
        'claude', '-p', '--output-format', 'stream-json', '--verbose', '--permission-mode', 'bypassPermissions',
        '--', 'Explain what src/app.ts does'
      ],
      agent_report: {
        is_error: false,
        subtype: 'success',
        session_id: '0f9b…',
        num_turns: 3,
        total_cost_usd: 0.021,
        duration_ms: 8011,
        duration_api_ms: 7450
      },
      sudo: { status: 'passwordless', password_needed: false, message: null },
      session_id: '0f9b…',
      usage: { input_tokens: 5120, output_tokens: 310, cost_usd: 0.021, model: 'claude-sonnet-4-5' },
      steps_summary: {
        commands: [{ command: 'wc -l src/app.ts', exit_code: 0, status: 'succeeded' }],
        commands_omitted: 0,
        files_changed: [],
        files_omitted: 0,
        tools: { Read: 1 },
        denied: [],
        turns: 2,
        messages: 2,
        errors: 0,
        skipped_lines: 0
      },
      structured_output: null,
      error: null,
      changes: null,
      processes_may_remain: false
    }
  ]
})
export type RunResult = Static<typeof RunResult>

/** A result read back from a store, with the fields added since it was written given their defaults. */
export function resultFromStore(value: unknown): unknown {
  return Value.Default(RunResult, value)
}

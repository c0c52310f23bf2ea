import { Type, type Static } from '@sinclair/typebox'

/** The longest text a step carries: a command's output, a message, an error are excerpts, never whole files. */
export const STEP_TEXT_MAX = 4096

const CallId = Type.String({
  description:
    "The CLI's own id of the call (claude's tool_use id, codex's item id, gemini's tool_id, opencode's callID): a " +
    'started step and its completion share it.'
})
const Phase = Type.Union([Type.Literal('started'), Type.Literal('completed')], {
  description: 'started: the agent began the call; completed: it ended (a CLI that reports only ends sends both).'
})
const Status = Type.Union(
  [Type.Literal('running'), Type.Literal('succeeded'), Type.Literal('failed'), Type.Literal('denied')],
  { description: 'running while started; then how the call ended (denied: a permission rule refused it).' }
)
const Change = Type.Union(
  [Type.Literal('created'), Type.Literal('edited'), Type.Literal('deleted'), Type.Null()],
  { description: 'null when the CLI does not say which (claude Write before it ends, gemini write_file).' }
)
const Excerpt = Type.String({ maxLength: STEP_TEXT_MAX, description: `At most ${STEP_TEXT_MAX} characters.` })

/**
 * What the agent is doing, in one vocabulary for every CLI: each agent's structured output read as it comes
 * (docs/agents.md has the table of which CLI event becomes which step).
 */
export const Step = Type.Union(
  [
    Type.Object(
      { kind: Type.Literal('message'), text: Excerpt, truncated: Type.Boolean() },
      { title: 'MessageStep', description: 'Text the agent wrote to the user.' }
    ),
    Type.Object(
      {
        kind: Type.Literal('command'),
        phase: Phase,
        call_id: CallId,
        command: Type.String({ maxLength: STEP_TEXT_MAX, description: 'As the CLI reported it.' }),
        status: Status,
        exit_code: Type.Union([Type.Integer(), Type.Null()], {
          description: 'Once completed, when the CLI says it (gemini mostly does not); null otherwise.'
        }),
        output: Type.Union([Excerpt, Type.Null()], { description: 'Once completed: the end of what it printed.' })
      },
      { title: 'CommandStep', description: 'A shell command the agent ran.' }
    ),
    Type.Object(
      {
        kind: Type.Literal('file_change'),
        phase: Phase,
        call_id: CallId,
        tool: Type.String({ description: 'The CLI tool that changed it (Edit, Write, replace, edit…).' }),
        path: Type.String(),
        change: Change,
        status: Status
      },
      { title: 'FileChangeStep', description: 'A file the agent created, edited or deleted through a tool.' }
    ),
    Type.Object(
      {
        kind: Type.Literal('tool'),
        phase: Phase,
        call_id: CallId,
        name: Type.String(),
        input: Type.String({ maxLength: 1024, description: 'What it was called with, summarised.' }),
        status: Status
      },
      { title: 'ToolStep', description: 'Any other tool call: reading, searching, fetching, an MCP tool…' }
    ),
    Type.Object(
      {
        kind: Type.Literal('error'),
        message: Excerpt,
        fatal: Type.Boolean({ description: 'The run cannot go on (false: a retry, a warning).' })
      },
      { title: 'ErrorStep', description: 'An error the CLI reported.' }
    ),
    Type.Object(
      {
        kind: Type.Literal('usage'),
        input_tokens: Type.Union([Type.Integer(), Type.Null()]),
        output_tokens: Type.Union([Type.Integer(), Type.Null()]),
        cost_usd: Type.Union([Type.Number(), Type.Null()], { description: 'When the CLI reports a cost.' }),
        model: Type.Union([Type.String(), Type.Null()]),
        cumulative: Type.Boolean({
          description: 'true: the run’s totals so far (replaces earlier ones); false: one more model call to add.'
        })
      },
      { title: 'UsageStep', description: 'Tokens (and cost) the agent’s model calls used.' }
    )
  ],
  { $id: 'Step', title: 'Step', description: 'One step of what the agent is doing.' }
)
export type Step = Static<typeof Step>

/** At most this many of each list a summary keeps (the rest counted): a result stays small whatever the run did. */
export const SUMMARY_COMMANDS_MAX = 100
export const SUMMARY_FILES_MAX = 200
export const SUMMARY_DENIALS_MAX = 50

export const StepsSummary = Type.Object(
  {
    commands: Type.Array(
      Type.Object({
        command: Type.String({ maxLength: STEP_TEXT_MAX }),
        exit_code: Type.Union([Type.Integer(), Type.Null()]),
        status: Status
      }),
      { maxItems: SUMMARY_COMMANDS_MAX, description: 'The commands it ran, in order, once ended.' }
    ),
    commands_omitted: Type.Integer({ description: 'Commands beyond the list.' }),
    files_changed: Type.Array(
      Type.Object({ path: Type.String(), change: Change }),
      { maxItems: SUMMARY_FILES_MAX, description: 'Each file it changed through a tool, once, with its last change.' }
    ),
    files_omitted: Type.Integer(),
    tools: Type.Record(Type.String(), Type.Integer(), { description: 'Calls of each other tool, by name.' }),
    denied: Type.Array(
      Type.Object({ kind: Type.String(), name: Type.String(), call_id: CallId }),
      { maxItems: SUMMARY_DENIALS_MAX, description: 'Calls a permission rule refused.' }
    ),
    turns: Type.Integer({
      description:
        'Model responses, counted from the steps: one begins with the first message or call after a call’s result.'
    }),
    messages: Type.Integer(),
    errors: Type.Integer(),
    skipped_lines: Type.Integer({ description: 'Lines of its output read as no step: not JSON, too long, unknown.' })
  },
  { description: 'What the agent did, from its steps.' }
)
export type StepsSummary = Static<typeof StepsSummary>

export const RunUsage = Type.Object(
  {
    input_tokens: Type.Union([Type.Integer(), Type.Null()]),
    output_tokens: Type.Union([Type.Integer(), Type.Null()]),
    cost_usd: Type.Union([Type.Number(), Type.Null()], {
      description:
        'Dollars: from the operator’s price table (`MODEL_PRICES_FILE`) when it prices the model used, else the ' +
        'CLI’s own figure; null when neither says.'
    }),
    model: Type.Union([Type.String(), Type.Null()])
  },
  { description: 'Tokens (and cost, when the CLI says) the run used in all.' }
)
export type RunUsage = Static<typeof RunUsage>

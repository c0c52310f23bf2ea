import { UUID } from './session-ids.js'
import { Type } from '@sinclair/typebox'
import type { AgentSpec } from './spec.js'
import { claudeSteps } from './steps/claude.js'

const CLAUDE_PERMISSION_MODES = [
  'acceptEdits', 'auto', 'bypassPermissions', 'default', 'dontAsk', 'plan'
] as const

/** Claude Code headless: `claude -p`, its JSON report parsed into the answer and `agent_report`. */
export const claude: AgentSpec<'claude'> = {
  agent: 'claude',
  defaultBin: 'claude',
  env: ['ANTHROPIC_*', 'CLAUDE_*', 'CLOUD_ML_*', 'VERTEX_*', 'GOOGLE_*', 'AWS_*', 'DISABLE_*', 'MCP_*', 'IS_SANDBOX'],
  summary: 'Run a task with Claude Code headless (`claude -p`)',
  description:
    'Runs `claude -p --output-format stream-json --verbose --permission-mode <CLAUDE_PERMISSION_MODE>` with the task ' +
    'on its standard input, in `cwd`, at most `timeout` seconds, and answers with the answer text of its final ' +
    'report as `output` and the rest as `agent_report`. Waits for the whole run: up to 30 minutes.',
  ownSettings: {
    CLAUDE_PERMISSION_MODE: Type.Union(
      CLAUDE_PERMISSION_MODES.map((mode) => Type.Literal(mode)),
      { default: 'bypassPermissions' }
    )
  },
  // stream-json in every run, followed or not: its tool calls are the result's steps, which json mode's one final
  // report never tells (that report is stream-json's last line, the `result` line parseClaudeReport reads).
  // With no prompt among its words, `claude -p` reads it from standard input, byte for byte (2.1.332).
  args: (settings, session) => [
    '-p',
    '--output-format', 'stream-json', '--verbose',
    '--permission-mode', settings.own['CLAUDE_PERMISSION_MODE']!,
    ...settings.extraArgs,
    // --resume takes an optional value: joined to it, the id is never read as anything else, nor the flag without it.
    ...(session === undefined ? [] : [`--resume=${session}`])
  ],
  resumes: { sessionId: UUID },
  steps: claudeSteps,
  // Claude Code refuses to skip its permission prompts as root (containers, CI), unless told it is in a sandbox. What
  // counts is who the agent runs as: a root service with AGENT_USER runs it as that user, and it works.
  problem: (settings, env, agentUid) =>
    agentUid === 0 &&
    settings.own['CLAUDE_PERMISSION_MODE'] === 'bypassPermissions' &&
    env['IS_SANDBOX'] !== '1'
      ? 'claude refuses CLAUDE_PERMISSION_MODE=bypassPermissions when run as root: set AGENT_USER (or run the ' +
        'service as another user), ' +
        'set CLAUDE_PERMISSION_MODE (e.g. acceptEdits), or IS_SANDBOX=1 if the service runs in a sandbox'
      : null
}

import { UUID } from './session-ids.js'
import { Type } from '@sinclair/typebox'
import type { AgentSpec } from './spec.js'
import { codexSteps } from './steps/codex.js'

const CODEX_SANDBOXES = ['bypass', 'workspace-write', 'read-only'] as const

/**
 * OpenAI Codex CLI, non-interactive: `codex exec`. It refuses to work outside a Git repository unless told to; it never
 * asks for approval in exec mode, and its sandbox is read-only unless set otherwise: CODEX_SANDBOX picks it, `bypass`
 * (the default) working as unattended as `crush run` and claude's bypassPermissions do. Its prompt is `-`, after
 * `--`: "read it from standard input", where the task is, byte for byte (0.171.0).
 */
export const codex: AgentSpec<'codex'> = {
  agent: 'codex',
  defaultBin: 'codex',
  env: ['CODEX_*', 'OPENAI_*', 'AZURE_OPENAI_*'],
  summary: 'Run a task with OpenAI Codex CLI (`codex exec`)',
  description:
    'Runs `codex exec --json --skip-git-repo-check -c allow_login_shell=false ' +
    '--dangerously-bypass-approvals-and-sandbox -- -` ' +
    '(or `--sandbox <CODEX_SANDBOX>`) with the task on its standard input, in `cwd`, at most `timeout` seconds, ' +
    'and answers with its last agent message as `output` (the error’s message when its turn failed) and whether it ' +
    'failed as `agent_report`. Waits for the whole run: up to 30 minutes.',
  ownSettings: {
    CODEX_SANDBOX: Type.Union(CODEX_SANDBOXES.map((mode) => Type.Literal(mode)), { default: 'bypass' })
  },
  args: (settings, session) => {
    const sandbox = settings.own['CODEX_SANDBOX']!
    return [
      'exec',
      '--json',
      '--skip-git-repo-check',
      '--color', 'never',
      // codex otherwise runs its commands in a login shell's environment, which re-reads /etc/profile and resets PATH:
      // the service's PATH (its sudo shim first) and the rest of the environment it chose would not reach them.
      '-c', 'allow_login_shell=false',
      ...(sandbox === 'bypass' ? ['--dangerously-bypass-approvals-and-sandbox'] : ['--sandbox', sandbox]),
      ...settings.extraArgs,
      // `exec resume` takes fewer flags than `exec` (no --sandbox, no --color): given to `exec` before it, they hold.
      ...(session === undefined ? [] : ['resume', session]),
      '--', '-'
    ]
  },
  resumes: { sessionId: UUID },
  steps: codexSteps
}

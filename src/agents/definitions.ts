import type { Config } from '../config.js'
import { parseClaudeReport, type ParsedReport } from './report.js'

export const TOOL_NAMES = ['crush_run', 'claude_run'] as const
export type ToolName = (typeof TOOL_NAMES)[number]

/** Everything that differs between agents; adding an agent is adding one entry to defineTools. */
export interface AgentTool {
  name: ToolName
  agent: string
  summary: string
  /** What the tool runs, for the OpenAPI document. */
  description: string
  bin: string
  maxAgents: number
  /** `live`: someone follows the output as it comes (a stream, an async run), so progress events are worth printing. */
  agentArgs(task: string, live: boolean): string[]
  /** Turns what the agent printed into the answer a person reads, when the agent reports in a structured form. */
  parseReport(output: string): ParsedReport | null
  /** Why every run would fail as configured, with the variable to change; null when nothing stands in the way. */
  problem(env: NodeJS.ProcessEnv): string | null
}

export function defineTools(config: Config): Record<ToolName, AgentTool> {
  return {
    crush_run: {
      name: 'crush_run',
      agent: 'crush',
      summary: 'Run a task with Crush (`crush run`)',
      description:
        'Runs `crush run -- <task>` (Crush approves its own tools in `run` mode) in `cwd`, at most `timeout` seconds, and ' +
        'answers with its exit and its output. Waits for the whole run: up to 30 minutes.',
      bin: config.crush.bin,
      maxAgents: config.crush.maxAgents,
      // `crush run` approves its tools by itself in non-interactive mode; `--` ends cobra's flags.
      agentArgs: (task, _live) => ['run', ...config.crush.extraArgs, '--', task],
      parseReport: () => null,
      problem: () => null
    },
    claude_run: {
      name: 'claude_run',
      agent: 'claude',
      summary: 'Run a task with Claude Code headless (`claude -p`)',
      description:
        'Runs `claude -p --output-format json --permission-mode <CLAUDE_PERMISSION_MODE> -- <task>` in `cwd`, at most ' +
        '`timeout` seconds, and answers with the answer text of its JSON report as `output` and the rest as ' +
        '`agent_report`. Waits for the whole run: up to 30 minutes.',
      bin: config.claude.bin,
      maxAgents: config.claude.maxAgents,
      // Followed live, claude reports each step as a stream-json line (its final `result` line is the same report
      // as json mode's, which parseClaudeReport reads either way).
      agentArgs: (task, live) => [
        '-p',
        ...(live ? ['--output-format', 'stream-json', '--verbose'] : ['--output-format', 'json']),
        '--permission-mode', config.claude.permissionMode,
        ...config.claude.extraArgs,
        '--', task
      ],
      parseReport: parseClaudeReport,
      // Claude Code refuses to skip its permission prompts as root (containers, CI), unless told it is in a sandbox.
      problem: (env) =>
        process.getuid?.() === 0 && config.claude.permissionMode === 'bypassPermissions' && env['IS_SANDBOX'] !== '1'
          ? 'claude refuses CLAUDE_PERMISSION_MODE=bypassPermissions when run as root: run the service as another user, ' +
            'set CLAUDE_PERMISSION_MODE (e.g. acceptEdits), or IS_SANDBOX=1 if the service runs in a sandbox'
          : null
    }
  }
}

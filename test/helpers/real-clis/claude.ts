import { npmTool } from '../npm-tool.js'

/** The Claude Code release the tests run (installed by them, never a dependency: it weighs about 400 MB). */
export const CLAUDE_VERSION = '2.1.332'

export const realClaude = (): Promise<string> => npmTool('@anthropic-ai/claude-code', CLAUDE_VERSION, 'claude')

/**
 * The environment that points claude at a scripted model server at `modelUrl` and keeps it off the network otherwise.
 * `claude -p` needs no file under `home`: it asks for no onboarding, no trust, no key approval in print mode, and
 * writes its own state (~/.claude.json, ~/.claude/) there as it goes.
 */
export function claudeOffline(home: string, modelUrl: string): Record<string, string> {
  return {
    ANTHROPIC_BASE_URL: modelUrl,
    // Any value: without a credential, claude answers "Not logged in" without calling the server.
    ANTHROPIC_API_KEY: 'sk-ant-api03-offline-e2e-test-key',
    // Also turns off the autoupdater and telemetry: otherwise it sends events to api.anthropic.com and probes the
    // server with HEAD /api/hello.
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    // A server that stops answering (a test's bug) fails the run in a second instead of minutes of retries.
    CLAUDE_CODE_MAX_RETRIES: '0'
  }
}

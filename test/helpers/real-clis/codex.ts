import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export const CODEX_VERSION = '0.171.0'

/**
 * What makes a real `codex exec` talk only to the scripted Responses server at `modelUrl` (see
 * model-servers/openai-responses.ts): a config.toml in a CODEX_HOME under `home`, and the environment that selects it.
 * codex ignores OPENAI_BASE_URL (with it, 0.171.0 still dials api.openai.com, and retries that forever), so the server
 * has to be a provider of the config's own.
 */
export function codexOffline(home: string, modelUrl: string): Record<string, string> {
  const codexHome = join(home, '.codex')
  mkdirSync(codexHome, { recursive: true })
  writeFileSync(join(codexHome, 'config.toml'), [
    '# The default model (gpt-6.2-sol) is "code mode only": its one tool runs JavaScript that calls the shell.',
    '# gpt-5.5 is in the bundled catalog (no "model metadata not found" error item) and gets exec_command directly.',
    'model = "gpt-5.5"',
    'model_provider = "scripted"',
    '',
    '[model_providers.scripted]',
    'name = "scripted"',
    `base_url = "${modelUrl}/v1"`,
    'wire_api = "responses"',
    '# No env_key: codex then sends no Authorization header and needs no login.',
    '# A failed request or stream is retried 5 times with backoff (about 25 s): a broken script should fail at once.',
    'request_max_retries = 0',
    'stream_max_retries = 0',
    '',
    '# Otherwise OTLP metrics go to ab.chatgpt.com.',
    '[analytics]',
    'enabled = false',
    '',
    '[features]',
    '# Otherwise the plugin marketplace is synced: git ls-remote github.com/openai/plugins.git, ' +
      'api.github.com, chatgpt.com.',
    'plugins = false',
    '# Otherwise a refused connection (the server already closed) is retried forever, whatever the limits above say.',
    'unbounded_connection_retries = false',
    ''
  ].join('\n'))
  // HOME would do as long as it is the fresh one; naming the directory keeps the config found whatever HOME is.
  return { CODEX_HOME: codexHome }
}

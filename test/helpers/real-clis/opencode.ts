import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export const OPENCODE_VERSION = '1.18.33'

/** The provider and model ids the config declares; `model` in the config is `<provider>/<model>`. */
const OPENCODE_PROVIDER_ID = 'scripted'
const OPENCODE_MODEL_ID = 'scripted-model'
const OPENCODE_OTHER_MODEL_ID = 'scripted-other'

/**
 * Points the real opencode CLI at a scripted Chat Completions server and keeps it off the network, for a run with
 * `HOME=home`. `modelUrl` is the server's base URL (no `/v1`). Writes `~/.config/opencode/opencode.json` and returns
 * the environment variables to add to the run.
 *
 * What opencode 1.18.33 reaches for on its own, and what stops it:
 * - the models catalog (GET https://models.opencode.ai/api.json, then every 60 minutes), which the first prompt waits
 *   for: OPENCODE_DISABLE_MODELS_FETCH. The provider is declared in full here, so the catalog is not needed.
 * - npm: in the background, every config dir (here `~/.config/opencode`) gets `@opencode-ai/plugin` installed with
 *   npm's own installer (packuments, then tarballs, from the npm registry). No switch turns it off; it is skipped
 *   when the dir already has `node_modules` and a `package-lock.json` that lists every dependency, which is what
 *   `seedConfigDir` leaves. The `@ai-sdk/openai-compatible` provider is bundled in the binary, and the default
 *   plugins are internal, so nothing else is installed.
 */
export function opencodeOffline(home: string, modelUrl: string): Record<string, string> {
  const configDir = join(home, '.config', 'opencode')
  mkdirSync(configDir, { recursive: true })
  writeFileSync(join(configDir, 'opencode.json'), JSON.stringify(opencodeConfig(modelUrl), null, 2))
  seedConfigDir(configDir)
  return {
    // Otherwise the first prompt waits on the catalog host (5.5 s through a refusing proxy, longer where it hangs),
    // and the catalog adds nothing: the scripted provider is declared in full in the config.
    OPENCODE_DISABLE_MODELS_FETCH: '1'
  }
}

/** The config: one openai-compatible provider at the scripted server, its only model selected for every use. */
function opencodeConfig(modelUrl: string): Record<string, unknown> {
  const model = `${OPENCODE_PROVIDER_ID}/${OPENCODE_MODEL_ID}`
  return {
    $schema: 'https://opencode.ai/config.json',
    provider: {
      [OPENCODE_PROVIDER_ID]: {
        // Bundled in the binary: nothing is installed from npm for it.
        npm: '@ai-sdk/openai-compatible',
        name: 'Scripted',
        options: { baseURL: `${modelUrl}/v1`, apiKey: 'scripted' },
        models: {
          [OPENCODE_MODEL_ID]: { name: 'Scripted model', tool_call: true },
          // Another the provider serves, for a run that names it (`model`).
          [OPENCODE_OTHER_MODEL_ID]: { name: 'Another scripted model', tool_call: true }
        }
      }
    },
    model,
    // The session-title request goes to the small model: named, it cannot fall back to anything but the server.
    small_model: model,
    // Only the scripted provider is loaded, whatever provider keys the environment holds (the service passes them on).
    enabled_providers: [OPENCODE_PROVIDER_ID],
    autoupdate: false,
    share: 'disabled',
    // Off already by default in 1.18.33 (its log says so); kept off because an enabled language server is downloaded
    // on first use of its language.
    lsp: false,
    formatter: false,
    // In a git work tree opencode snapshots it with git around every step: background processes no test looks at.
    snapshot: false
  }
}

/**
 * Makes a config dir look installed, so opencode skips its background `npm install @opencode-ai/plugin` there (it
 * reinstalls when `node_modules` is missing or the lock lacks a dependency that package.json or its own list names).
 */
function seedConfigDir(configDir: string): void {
  mkdirSync(join(configDir, 'node_modules'), { recursive: true })
  const dependencies = { '@opencode-ai/plugin': OPENCODE_VERSION }
  writeFileSync(join(configDir, 'package.json'), JSON.stringify({ dependencies }, null, 2))
  writeFileSync(
    join(configDir, 'package-lock.json'),
    JSON.stringify({ lockfileVersion: 3, packages: { '': { dependencies } } }, null, 2)
  )
}

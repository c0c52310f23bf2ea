import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** The Gemini CLI release the end-to-end tests run. */
export const GEMINI_VERSION = '0.61.0'

/**
 * Gemini's user settings (`~/.gemini/settings.json`): what a fresh HOME needs for a headless run against a local
 * server, with nothing sent anywhere else.
 */
const SETTINGS = {
  // With GOOGLE_GEMINI_BASE_URL set and no type chosen, gemini picks its `gateway` auth, which headless mode then
  // rejects ("Invalid auth method selected."): the API key type sends GEMINI_API_KEY to the base URL.
  security: { auth: { selectedType: 'gemini-api-key' } },
  // A fixed model bypasses the router, which otherwise first asks a classifier model (a JSON side request) which to
  // use.
  model: { name: 'gemini-2.5-flash' },
  // Clearcut usage logs (play.googleapis.com) and OpenTelemetry stay off.
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
  // Only the interactive UI looks for a newer release on npm; off all the same, should a test ever start one here.
  general: { enableAutoUpdate: false, enableAutoUpdateNotification: false }
}

/**
 * Writes gemini's settings under `home` and returns the environment that points it at a scripted Gemini API server at
 * `modelUrl`. Every name matches the gemini spec's `GEMINI_*`/`GOOGLE_*`, so the service passes them on. The files are
 * the caller's: to run gemini as another user, hand `home` over to it afterwards (`chown -R`), since gemini writes its
 * project registry and chats under ~/.gemini and exits 1 when it cannot.
 */
export function geminiOffline(home: string, modelUrl: string): Record<string, string> {
  mkdirSync(join(home, '.gemini'), { recursive: true })
  writeFileSync(join(home, '.gemini', 'settings.json'), JSON.stringify(SETTINGS, null, 2) + '\n')
  return {
    // The API key auth needs one to start; the scripted server ignores it.
    GEMINI_API_KEY: 'offline-e2e-test-key',
    // Read by gemini's content generator (and @google/genai) as the Gemini API's base URL.
    GOOGLE_GEMINI_BASE_URL: modelUrl
  }
}

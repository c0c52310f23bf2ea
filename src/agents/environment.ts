/**
 * What every agent inherits from the service: what any program needs to work (PATH, HOME, locale, proxies,
 * certificates) and never the service's own secrets. Each agent's spec adds the variables it reads (its providers'
 * keys, its settings), which no other agent sees. A name is kept when it matches the allow list and not the deny list;
 * deny wins. Patterns are exact names or prefixes ending in `*`.
 */
export const DEFAULT_AGENT_ENV_ALLOW = [
  'PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'TERM', 'TZ', 'TMPDIR', 'LANG', 'LANGUAGE', 'LC_*', 'XDG_*',
  'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy',
  'NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR',
  // Windows: what wsl.exe and Windows programs need to start at all.
  'SYSTEMROOT', 'SystemRoot', 'WINDIR', 'COMSPEC', 'PATHEXT', 'USERPROFILE', 'APPDATA', 'LOCALAPPDATA', 'TEMP', 'TMP',
  'WSLENV'
]

/**
 * The service's own settings and secrets, every route to a password prompt (with no askpass helper and no display, a
 * sudo that needs a password fails at once instead of waiting for nobody), and the routes out of the containment.
 */
export const DEFAULT_AGENT_ENV_DENY = [
  'API_TOKENS', 'ALLOW_UNAUTHENTICATED', 'REDIS_URL', 'SUDO_ASKPASS', 'DISPLAY', 'WAYLAND_DISPLAY',
  // The user's systemd and session bus would start a process for the agent outside its containment
  // (systemd-run --user).
  'XDG_RUNTIME_DIR', 'DBUS_SESSION_BUS_ADDRESS'
]

/** Never passed on, whatever the configuration says: the service's secrets (and where they are), the prompt routes. */
const ALWAYS_DENIED = [
  'API_TOKENS', 'API_TOKENS_FILE', 'REDIS_URL', 'REDIS_URL_FILE', 'WEBHOOK_SECRET', 'WEBHOOK_SECRET_FILE',
  'WEBHOOK_SECRETS', 'WEBHOOK_SECRETS_FILE', 'SUDO_ASKPASS', 'DISPLAY', 'WAYLAND_DISPLAY'
]

export interface AgentEnvRule {
  allow: string[]
  deny: string[]
}

function matches(name: string, pattern: string, ignoreCase: boolean): boolean {
  const [subject, rule] = ignoreCase ? [name.toUpperCase(), pattern.toUpperCase()] : [name, pattern]
  return rule.endsWith('*') ? subject.startsWith(rule.slice(0, -1)) : subject === rule
}

/** One agent's rule: the common allow list (AGENT_ENV_ALLOW) and the variables its spec reads. */
export const ruleForAgent = (common: AgentEnvRule, agentVariables: string[]): AgentEnvRule => ({
  allow: [...common.allow, ...agentVariables],
  deny: common.deny
})

/** Windows' variable names ignore case (its PATH is usually spelled `Path`): so do the lists there. */
export function buildAgentEnv(
  parent: NodeJS.ProcessEnv,
  rule: AgentEnvRule,
  ignoreCase = process.platform === 'win32'
): NodeJS.ProcessEnv {
  const deny = [...rule.deny, ...ALWAYS_DENIED]
  const env: NodeJS.ProcessEnv = {}
  for (const [name, value] of Object.entries(parent)) {
    if (value === undefined) continue
    const allowed = rule.allow.some((pattern) => matches(name, pattern, ignoreCase))
    if (allowed && !deny.some((pattern) => matches(name, pattern, ignoreCase))) env[name] = value
  }
  return env
}

/** The names that must cross from Windows into the distro: WSL passes only what WSLENV lists. */
const STAYS_ON_WINDOWS = new Set([
  'PATH', 'WSLENV', 'SYSTEMROOT', 'SystemRoot', 'WINDIR', 'COMSPEC', 'PATHEXT', 'USERPROFILE', 'APPDATA',
  'LOCALAPPDATA', 'TEMP', 'TMP', 'HOME', 'TMPDIR', 'SHELL', 'USER', 'LOGNAME'
])

export function withWslEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const forwarded = Object.keys(env).filter((name) => !STAYS_ON_WINDOWS.has(name))
  const existing = env['WSLENV'] ? env['WSLENV'].split(':').filter(Boolean) : []
  const names = [...new Set([...existing, ...forwarded])]
  return names.length === 0 ? env : { ...env, WSLENV: names.join(':') }
}

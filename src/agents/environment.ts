/**
 * Variables that would let sudo reach a password prompt outside the agent's (absent) terminal: an askpass helper, and
 * the displays sudo uses to decide to run one. Without them, sudo needing a password fails at once instead of waiting.
 */
const PROMPT_ROUTES = ['SUDO_ASKPASS', 'DISPLAY', 'WAYLAND_DISPLAY']

export function buildAgentEnv(parent: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env = { ...parent }
  for (const name of PROMPT_ROUTES) delete env[name]
  return env
}

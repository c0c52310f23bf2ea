/** The search path of an environment: on Windows the variable is usually spelled `Path`, and names ignore case. */
export function searchPath(env: NodeJS.ProcessEnv): string {
  if (env['PATH'] !== undefined) return env['PATH']
  const name = Object.keys(env).find((key) => key.toUpperCase() === 'PATH')
  return name === undefined ? '' : env[name] ?? ''
}

/** The agent could not be started at all (binary missing, not executable, directory gone). */
export class AgentSpawnError extends Error {
  readonly errno: string | undefined
  constructor(cause: NodeJS.ErrnoException) {
    super(cause.message, { cause })
    this.name = 'AgentSpawnError'
    this.errno = cause.code
  }

  /** What spawn itself would have said of a file it could not find. */
  static notFound(file: string): AgentSpawnError {
    return new AgentSpawnError(Object.assign(new Error(`spawn ${file} ENOENT`), { code: 'ENOENT' }))
  }
}

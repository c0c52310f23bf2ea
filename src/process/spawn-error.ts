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

/**
 * The agent started but its record could not be written (DATA_DIR full or read-only): a run no later life could find
 * must not go on, so it was killed at once, before anything was answered.
 */
export class RunNotRecorded extends Error {
  constructor(cause: Error) {
    super(cause.message, { cause })
    this.name = 'RunNotRecorded'
  }
}

/**
 * The one catalog of what the service may answer instead of a result: every code with its status, when it happens and
 * how its message reads. The layers below HTTP throw `ServiceError`s naming a code; `http/error-handler.ts` maps them
 * to answers, and the OpenAPI document, its examples and docs/api.md's table are written from this same list.
 */

interface OwnError {
  status: number
  when: string
  /** How the message reads: the arguments are what the thrower knows (a path, a limit). */
  message: (...args: never[]) => string
  /** Arguments that make the documented example message. */
  example: readonly unknown[]
  /** A 5xx a caller can act on (install the agent, retry later): its message is shown; every other 5xx is opaque. */
  exposed?: true
  /** Logged, never read: the client is gone. Not in the documented table. */
  unread?: true
}

interface ForeignError {
  status: number
  when: string
  /** Codes of Fastify's or Node's own refusals answered under this code. */
  from?: readonly string[]
  example: string
}

export const ERROR_CATALOG = {
  VALIDATION_ERROR: {
    status: 400,
    when: 'The body breaks the RunParams schema; the message names the field and why.',
    message: (details: string) => details,
    example: ['body/timeout must be <= 1800']
  },
  INVALID_JSON: {
    status: 400,
    when: 'The body is not JSON, or is empty.',
    from: ['FST_ERR_CTP_EMPTY_JSON_BODY', 'FST_ERR_CTP_INVALID_JSON_BODY'],
    example: "Body is not valid JSON but content-type is set to 'application/json'"
  },
  INVALID_CONTENT_LENGTH: {
    status: 400,
    when: 'The content-length header does not match the body.',
    from: ['FST_ERR_CTP_INVALID_CONTENT_LENGTH'],
    example: 'Request body size did not match Content-Length'
  },
  MALFORMED_REQUEST: {
    status: 400,
    when: 'Not valid HTTP/1.1 (a bad header byte, Content-Length with Transfer-Encoding…); the connection is closed.',
    message: (parserCode: string) => `The request is not valid HTTP/1.1 (${parserCode})`,
    example: ['HPE_INVALID_HEADER_TOKEN']
  },
  BAD_URL: {
    status: 400,
    when: 'The URL cannot be decoded.',
    from: ['FST_ERR_BAD_URL'],
    example: "'/%zz' is not a valid url component"
  },
  RESUME_NOT_SUPPORTED: {
    status: 400,
    when: '`resume` for an agent whose CLI cannot continue a session non-interactively (crush).',
    message: (tool: string) => `body/resume: ${tool} cannot continue a session non-interactively`,
    example: ['crush_run']
  },
  RESUME_PLACE_MISMATCH: {
    status: 400,
    when:
      '`resume` with a `cwd`, `wsl_distro` or `wsl_user` other than the session’s: a session continues where it ran ' +
      '(leave them out to use the session’s).',
    message: (field: string, value: string, sessionValue: string) =>
      `body/${field}: the session ran with ${field} ${sessionValue}, not ${value}; leave it out to continue there`,
    example: ['cwd', '/srv/other', '/srv/project']
  },
  MODEL_NOT_ALLOWED: {
    status: 400,
    when: '`model` is not one of the models the operator allows this tool (`<AGENT>_MODELS`).',
    message: (model: string, tool: string, allowed: readonly string[]) =>
      `body/model: ${tool} may not use ${model}; the models it allows: ${allowed.join(', ')}`,
    example: ['opus', 'claude_run', ['sonnet', 'haiku']]
  },
  WEBHOOKS_NOT_CONFIGURED: {
    status: 400,
    when: '`webhook` asked for, but neither WEBHOOK_SECRET nor WEBHOOK_SECRETS gives this token a secret to sign with.',
    message: () => 'body/webhook: webhooks are not configured for this token (WEBHOOK_SECRET or WEBHOOK_SECRETS)',
    example: []
  },
  WEBHOOK_URL_NOT_ALLOWED: {
    status: 400,
    when:
      '`webhook.url` is not an http(s) URL of a public address (a loopback, private, link-local or other special ' +
      'address, or a name resolving to one), unless WEBHOOK_ALLOW_HOSTS names it; or it carries credentials.',
    message: (reason: string) => `body/webhook/url: not a URL webhooks may reach: ${reason}`,
    example: ['10.0.0.5 is not a public address']
  },
  CWD_NOT_FOUND: {
    status: 400,
    when: '`cwd` does not exist on this host, or the user agents run as (AGENT_USER) cannot enter it.',
    message: (path: string) => `body/cwd: ${path} does not exist`,
    example: ['/srv/project']
  },
  CWD_NOT_A_DIRECTORY: {
    status: 400,
    when: '`cwd` exists on this host but is not a directory.',
    message: (path: string) => `body/cwd: ${path} is not a directory`,
    example: ['/srv/project/README.md']
  },
  WSL_NOT_AVAILABLE: {
    status: 400,
    when: '`wsl_distro` on a host that is not Windows: only a Windows host runs agents inside WSL.',
    message: (platform: string) =>
      `body/wsl_distro: this service runs on ${platform}; only a Windows host runs agents inside a WSL distro`,
    example: ['linux']
  },
  WSL_DISTRO_NOT_FOUND: {
    status: 400,
    when: 'Windows hosts: `wsl_distro` names no distro that `wsl --list` knows.',
    message: (distro: string) => `body/wsl_distro: there is no WSL distro named ${distro} on this host (wsl --list)`,
    example: ['Arch']
  },
  WSL_ARGUMENT_UNSAFE: {
    status: 400,
    when:
      "Windows hosts: `cwd` would be misread by wsl.exe's own command-line parser (a `\"`, or a blank with a " +
      'trailing `\\`).',
    message: (problem: string) => problem,
    example: ['body/cwd: a directory inside WSL cannot contain `"`: wsl.exe would end --cd at it']
  },
  COMMAND_LINE_TOO_LONG: {
    status: 400,
    when:
      "Windows hosts: the command line would exceed Windows' 32,767 characters (quotes and backslashes in the task " +
      'count twice).',
    message: (length: number, max: number) =>
      `body/task: the command line would be ${length} characters, over the ${max} Windows accepts ` +
      '(quotes and backslashes in the task count twice)',
    example: [40123, 32766]
  },
  NOT_A_GIT_REPOSITORY: {
    status: 400,
    when: '`workspace: "worktree"` with a `cwd` that is in no git repository (as the agent’s user sees it).',
    message: (cwd: string) => `body/cwd: ${cwd} is not in a git repository; a worktree run needs one`,
    example: ['/srv/project']
  },
  BASE_NOT_FOUND: {
    status: 400,
    when: '`base` names no commit of the repository (always read as a revision, never as an option).',
    message: (base: string) => `body/base: ${JSON.stringify(base)} names no commit of the repository`,
    example: ['v9.9']
  },
  INVALID_BRANCH_NAME: {
    status: 400,
    when: '`commit.branch` is not a valid branch name (`git check-ref-format --branch`), or one a revision would ' +
      'read as another ref (`refs/…`, `heads/…`, `tags/…`, `remotes/…`, `@`, `HEAD` and other pseudo-refs).',
    message: (why: string) => `body/commit/branch: ${why}`,
    example: ['"feature..x" is not a valid branch name']
  },
  BAD_OUTPUT_SCHEMA: {
    status: 400,
    when:
      '`output_schema` is not a JSON Schema (2020-12) Ajv compiles in strict mode, or is over 64 KiB, or a pattern ' +
      'of it is not RE2 syntax (no backreferences, no lookaround: patterns run in linear time); or, for crush ' +
      '(its task on its command line), the task and the schema together are over 120,000 bytes.',
    message: (reason: string) => `body/output_schema: not a schema this service can check answers against: ${reason}`,
    example: ['strict mode: unknown keyword: "requred"']
  },
  LIMIT_ABOVE_CEILING: {
    status: 400,
    when: 'A `limits` entry is above the operator’s ceiling for the tool (`<AGENT>_MAX_TURNS`, `_MAX_TOKENS`, ' +
      '`_MAX_COST_USD`): a run may lower a ceiling, never raise it.',
    message: (limit: string, asked: number, ceiling: number) =>
      `body/limits/${limit}: ${asked} is above this tool’s ceiling of ${ceiling}`,
    example: ['max_turns', 50, 20]
  },
  LIMIT_NOT_SUPPORTED: {
    status: 400,
    when: '`limits` for a tool whose output says nothing of turns, tokens or cost (crush prints plain text).',
    message: (limit: string, tool: string) =>
      `body/limits/${limit}: ${tool} reports no turns, tokens nor cost: nothing could hold its run to a limit`,
    example: ['max_turns', 'crush_run']
  },
  COST_UNKNOWN: {
    status: 400,
    when: 'A cost limit (`limits.max_cost_usd`, the tool’s `<AGENT>_MAX_COST_USD`, or the token’s ' +
      '`TOKEN_DAILY_COST_USD`) for a tool whose CLI reports no cost, with a model the operator’s price table ' +
      '(`MODEL_PRICES_FILE`) does not price.',
    message: (tool: string, model: string | undefined) =>
      `body/limits/max_cost_usd: ${tool} reports no cost, and MODEL_PRICES_FILE prices no ` +
      `${model ?? 'model for a run that names none'}: no cost limit (the run’s, the tool’s, the token’s daily) ` +
      'can be held',
    example: ['codex_run', 'gpt-5.1-codex']
  },
  WORKSPACE_NOT_SUPPORTED: {
    status: 400,
    when: '`workspace: "worktree"` where the service cannot make one yet: on a Windows host outside WSL (Git for ' +
      'Windows).',
    message: (where: string) => `body/workspace: worktree runs are not available ${where}`,
    example: ['on a Windows host outside WSL yet']
  },
  UNAUTHORIZED: {
    status: 401,
    when: 'API_TOKENS is set and the request has no right `Authorization: Bearer <token>`.',
    from: ['FST_BEARER_AUTH_MISSING_AUTHORIZATION_HEADER', 'FST_BEARER_AUTH_INVALID_AUTHORIZATION_HEADER'],
    example: 'missing authorization header'
  },
  HOST_NOT_ALLOWED: {
    status: 403,
    when: 'No API_TOKENS, and Host is not one of this service’s names (DNS rebinding).',
    message: (host: string) =>
      `Host ${host} is not this service: without API_TOKENS only its own names are served (ALLOWED_HOSTS adds more)`,
    example: ['rebind.example:8080']
  },
  FORBIDDEN_PATH: {
    status: 403,
    when: 'A path that leaves the documentation’s directory (/docs).',
    from: ['FST_STATIC_FORBIDDEN_PATH'],
    example: 'Forbidden path'
  },
  ORIGIN_NOT_ALLOWED: {
    status: 403,
    when: 'No API_TOKENS, and a browser sent an Origin that is not one of this service’s names.',
    message: (origin: string) =>
      `Origin ${origin} may not call this service: without API_TOKENS only pages of its own names may ` +
      '(ALLOWED_HOSTS adds more)',
    example: ['https://attacker.example']
  },
  ROUTE_NOT_FOUND: {
    status: 404,
    when: 'No route matches the method and path.',
    message: (method: string, url: string) => `Route ${method} ${url} not found`,
    example: ['POST', '/tools/nope_run']
  },
  RUN_NOT_FOUND: {
    status: 404,
    when:
      'No such run for this caller: unknown, expired, another token’s, or started on another replica whose runs ' +
      'this one cannot see (they share them with RUNS_STORE=redis).',
    message: (id: string) =>
      `No run ${id} of yours: unknown, expired, or started on a replica that does not share its runs with this one`,
    example: ['0b5e…']
  },
  SESSION_NOT_FOUND: {
    status: 404,
    when:
      '`resume` names no session this token’s runs of this tool reported: unknown, another caller’s, another ' +
      'tool’s, still in its first run, or past SESSIONS_RETENTION_MS.',
    message: (id: string) => `body/resume: no session ${id} of yours to continue with this tool`,
    example: ['9f1c…']
  },
  DIFF_NOT_FOUND: {
    status: 404,
    when:
      'The run has no diff here: not a worktree run, not ended, its diff not kept (an error), or it ran on another ' +
      'replica (each keeps the diffs of its own runs).',
    message: (id: string) => `Run ${id} has no diff on this replica`,
    example: ['0b5e…']
  },
  METHOD_NOT_ALLOWED: {
    status: 405,
    when: 'GET or DELETE on /mcp: the endpoint is stateless, with no server-initiated stream and no session to end.',
    message: (method: string) =>
      `${method} /mcp: this MCP endpoint keeps no session and opens no stream of its own; send JSON-RPC with POST`,
    example: ['GET']
  },
  SESSION_BUSY: {
    status: 409,
    when:
      'Another run is continuing this session now: a CLI’s session files are not safe for two writers. Retry once ' +
      'it ends.',
    message: (id: string) => `body/resume: session ${id} is being continued by another run; retry once it ends`,
    example: ['9f1c…']
  },
  BRANCH_EXISTS: {
    status: 409,
    when: 'The branch `commit` would make exists already: a run never moves a branch it did not make.',
    message: (branch: string) => `body/commit/branch: branch ${branch} exists already`,
    example: ['agent-runner/fix-login']
  },
  REQUEST_TIMEOUT: {
    status: 408,
    when: 'The request (headers and body) did not arrive within REQUEST_TIMEOUT_MS; the connection is closed.',
    message: () => 'The request did not arrive in time (REQUEST_TIMEOUT_MS)',
    example: []
  },
  BODY_TOO_LARGE: {
    status: 413,
    when: 'The body is over 512 KiB.',
    from: ['FST_ERR_CTP_BODY_TOO_LARGE'],
    example: 'Request body is too large'
  },
  URL_TOO_LONG: {
    status: 414,
    when: 'A path parameter is over 100 characters.',
    from: ['FST_ERR_MAX_PARAM_LENGTH'],
    example: 'Request path parameter id exceeds the max length of 100'
  },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    when: 'The content-type is not application/json.',
    from: ['FST_ERR_CTP_INVALID_MEDIA_TYPE'],
    example: 'Unsupported Media Type: text/plain'
  },
  HEADERS_TOO_LARGE: {
    status: 431,
    when: 'The request headers are over 16 KiB; the connection is closed.',
    message: () => 'The request headers are over 16 KiB',
    example: []
  },
  AGENT_LIMIT_REACHED: {
    status: 429,
    when: 'The tool already runs as many agents as it may; retry later.',
    // The seed's message, `Limite de N agents atteinte`, in French that agrees with N (`Limite de 1 agent atteinte`).
    message: (limit: number) => `Limite de ${limit} agent${limit > 1 ? 's' : ''} atteinte`,
    example: [2]
  },
  BUDGET_EXHAUSTED: {
    status: 429,
    when: 'The token’s runs have cost its daily ceiling (`TOKEN_DAILY_COST_USD`) over the last 24 hours; retry once ' +
      'older runs leave that window.',
    message: (caller: string, ceiling: number, spent: number) =>
      `${caller} has spent $${spent.toFixed(4)} of its $${ceiling} a day over the last 24 hours`,
    example: ['alice', 10, 10.0213]
  },
  QUEUE_FULL: {
    status: 429,
    when: '`queue_timeout` given, but `MAX_QUEUED_<AGENT>` runs of the tool wait already; retry later.',
    message: (tool: string, max: number) => `${max} run${max > 1 ? 's' : ''} of ${tool} wait already: queue full`,
    example: ['claude_run', 100]
  },
  QUEUE_TIMED_OUT: {
    status: 429,
    when: 'The run waited `queue_timeout` seconds for a slot of its tool and none freed up; nothing was started.',
    message: (seconds: number, limit: number) =>
      `Limite de ${limit} agent${limit > 1 ? 's' : ''} atteinte: no slot freed up within ${seconds} s (queue_timeout)`,
    example: [120, 2]
  },
  CLIENT_CLOSED_REQUEST: {
    // Answered to nobody (the connection is gone); 499 is the status proxies log for a client that closed its request.
    status: 499,
    when: 'The client closed the request before its agent started; nobody reads this answer, the access log does.',
    message: () => 'The client closed the request before its agent started',
    example: [],
    unread: true
  },
  INTERNAL_ERROR: {
    status: 500,
    when: 'An unexpected failure; the details are in the service log, never in the answer.',
    message: () => 'Internal server error',
    example: []
  },
  AGENT_NOT_INSTALLED: {
    status: 503,
    when: "The agent's executable is not on the service's PATH.",
    message: (agent: string, file: string) => `The ${agent} agent is not installed here: ${file} was not found on PATH`,
    example: ['claude', 'claude'],
    exposed: true
  },
  AGENT_SPAWN_FAILED: {
    status: 503,
    when: "The agent's executable exists but could not be started.",
    message: (agent: string, reason: string) => `The ${agent} agent could not be started: ${reason}`,
    example: ['crush', 'EACCES'],
    exposed: true
  },
  RUN_NOT_RECORDED: {
    status: 503,
    when: 'The run could not be recorded under DATA_DIR (disk full, read-only): its agent was killed at once.',
    message: (reason: string) => `The run could not be recorded, so its agent was stopped: ${reason}`,
    example: ['ENOSPC: no space left on device, write'],
    exposed: true
  },
  SLOTS_UNAVAILABLE: {
    status: 503,
    when: 'SLOTS_BACKEND=redis and Redis does not answer; nothing was started. Retry later.',
    message: (reason: string) => `The shared agent slots cannot be reached (Redis): ${reason}`,
    example: ['Connection is closed.'],
    exposed: true
  },
  NO_WORKER: {
    status: 503,
    when:
      'ROLE=api: the run was admitted, and no worker of the fleet with room for its tool took it in time; ' +
      'it was taken back, nothing was started. Start a worker (ROLE=worker) or retry later.',
    message: (tool: string, seconds: number) =>
      `No worker took the ${tool} run within ${seconds} s: is a worker (ROLE=worker) running with this agent?`,
    example: ['claude_run', 10],
    exposed: true
  },
  WORKER_LOST: {
    status: 503,
    when: 'ROLE=api: the worker that took the run went silent before its agent started; nothing ran.',
    message: (tool: string) => `The worker that took the ${tool} run went silent before starting it: retry`,
    example: ['claude_run'],
    exposed: true
  },
  RUN_LOST: {
    status: 503,
    when:
      'ROLE=api: the worker running a synchronous or streamed run went silent (killed, its host gone) before its ' +
      'end; its agent may have done part of its task, and is never run again.',
    message: (tool: string) =>
      `The worker running the ${tool} run went silent before its end: what its agent did is unknown`,
    example: ['claude_run'],
    exposed: true
  },
  RUNS_UNAVAILABLE: {
    status: 503,
    when: 'RUNS_STORE=redis and Redis does not answer: the run cannot be stored, read or reached.',
    message: (reason: string) => `The shared run store cannot be reached (Redis): ${reason}`,
    example: ['Connection is closed.'],
    exposed: true
  },
  GIT_NOT_INSTALLED: {
    status: 503,
    when: '`workspace: "worktree"`, and git is not on the service’s PATH.',
    message: () => 'git is not installed here (not found on PATH): worktree runs need it',
    example: [],
    exposed: true
  },
  WORKTREE_NOT_CREATED: {
    status: 503,
    when:
      'The run’s worktree could not be made (the agent’s user cannot write the repository’s `.git`, a full disk…); ' +
      'nothing was started.',
    message: (reason: string) => `The run’s worktree could not be made: ${reason}`,
    example: ['git worktree: exit 128: fatal: could not create leading directories of \'.git/worktrees\''],
    exposed: true
  },
  SHUTTING_DOWN: {
    status: 503,
    when: 'The service began shutting down before the agent started; nothing was started.',
    message: () => 'The service is shutting down: the run was not started',
    example: [],
    exposed: true
  }
} as const satisfies Record<string, OwnError | ForeignError>

export type ErrorCode = keyof typeof ERROR_CATALOG
type Catalog = typeof ERROR_CATALOG
/** The codes the service raises itself, each with the arguments its message needs. */
type OwnCode = { [C in ErrorCode]: Catalog[C] extends { message: (...args: never[]) => string } ? C : never }[ErrorCode]
type MessageArgs<C extends OwnCode> = Catalog[C] extends { message: (...args: infer A) => string } ? A : never

/**
 * A refusal or a failure the caller is told about, by code. Thrown by any layer; only HTTP knows it becomes a status.
 * No stack trace: each is an answer, not a bug, and capturing one would be most of its cost.
 */
export class ServiceError extends Error {
  readonly code: ErrorCode

  constructor(code: ErrorCode, message: string) {
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super(message)
    Error.stackTraceLimit = limit
    this.name = 'ServiceError'
    this.code = code
  }
}

export function serviceError<C extends OwnCode>(code: C, ...args: MessageArgs<C>): ServiceError {
  const message = ERROR_CATALOG[code].message as (...args: MessageArgs<C>) => string
  return new ServiceError(code, message(...args))
}

export const statusOf = (code: ErrorCode): number => ERROR_CATALOG[code].status

/** The message the documentation shows for a code. */
export function exampleMessage(code: ErrorCode): string {
  const entry: OwnError | ForeignError = ERROR_CATALOG[code]
  return 'message' in entry ? (entry.message as (...args: unknown[]) => string)(...entry.example) : entry.example
}

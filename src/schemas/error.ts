import { Type, type Static } from '@sinclair/typebox'

/**
 * Every code the service answers with, by status, with when it happens and a message it may carry: the OpenAPI
 * responses, their examples and the document's error table are all written from this one table.
 */
export const ERROR_CODES = {
  400: {
    VALIDATION_ERROR: ['The body breaks the RunParams schema; the message names the field and why.', 'body/timeout must be <= 1800'],
    INVALID_JSON: ['The body is not JSON, or is empty.', "Body is not valid JSON but content-type is set to 'application/json'"],
    INVALID_CONTENT_LENGTH: ['The content-length header does not match the body.', 'Request body size did not match Content-Length'],
    MALFORMED_REQUEST: ['Not valid HTTP/1.1 (a bad header byte, Content-Length with Transfer-Encoding…); the connection is closed.', 'The request is not valid HTTP/1.1 (HPE_INVALID_HEADER_TOKEN)'],
    BAD_URL: ['The URL cannot be decoded.', "'/%zz' is not a valid url component"],
    CWD_NOT_FOUND: ['`cwd` does not exist on this host.', 'body/cwd: /srv/project does not exist'],
    CWD_NOT_A_DIRECTORY: ['`cwd` exists on this host but is not a directory.', 'body/cwd: /srv/project/README.md is not a directory'],
    WSL_DISTRO_NOT_FOUND: ['Windows hosts: `wsl_distro` names no distro that `wsl --list` knows.', 'body/wsl_distro: there is no WSL distro named Arch on this host (wsl --list)'],
    WSL_ARGUMENT_UNSAFE: [
      "Windows hosts: `cwd` would be misread by wsl.exe's own command-line parser (a `\"`, or a blank with a trailing `\\`).",
      'body/cwd: a directory inside WSL cannot contain `"`: wsl.exe would end --cd at it'
    ],
    COMMAND_LINE_TOO_LONG: [
      "Windows hosts: the command line would exceed Windows' 32,767 characters (quotes and backslashes in the task count twice).",
      'body/task: the command line would be 40123 characters, over the 32766 Windows accepts (quotes and backslashes in the task count twice)'
    ]
  },
  401: { UNAUTHORIZED: ['API_TOKENS is set and the request has no right `Authorization: Bearer <token>`.', 'missing authorization header'] },
  403: {
    HOST_NOT_ALLOWED: ['No API_TOKENS, and Host is not one of this service’s names (DNS rebinding).', 'Host rebind.example:8080 is not this service: without API_TOKENS only its own names are served (ALLOWED_HOSTS adds more)'],
    FORBIDDEN_PATH: ['A path that leaves the documentation’s directory (/docs).', 'Forbidden path'],
    ORIGIN_NOT_ALLOWED: ['No API_TOKENS, and a browser sent an Origin that is not one of this service’s names.', 'Origin https://attacker.example may not call this service: without API_TOKENS only pages of its own names may (ALLOWED_HOSTS adds more)']
  },
  408: { REQUEST_TIMEOUT: ['The request (headers and body) did not arrive within REQUEST_TIMEOUT_MS; the connection is closed.', 'The request did not arrive in time (REQUEST_TIMEOUT_MS)'] },
  404: {
    ROUTE_NOT_FOUND: ['No route matches the method and path.', 'Route POST /tools/codex_run not found'],
    RUN_NOT_FOUND: ['No such async run on this replica: unknown, expired, or started elsewhere.', 'No run 0b5e… here: unknown, expired, or started on another replica']
  },
  414: { URL_TOO_LONG: ['A path parameter is over 100 characters.', 'Request path parameter id exceeds the max length of 100'] },
  431: { HEADERS_TOO_LARGE: ['The request headers are over 16 KiB; the connection is closed.', 'The request headers are over 16 KiB'] },
  413: { BODY_TOO_LARGE: ['The body is over 512 KiB.', 'Request body is too large'] },
  415: { UNSUPPORTED_MEDIA_TYPE: ['The content-type is not application/json.', 'Unsupported Media Type: text/plain'] },
  429: { AGENT_LIMIT_REACHED: ['The tool already runs as many agents as it may; retry later.', 'Limite de 2 agents atteinte'] },
  500: { INTERNAL_ERROR: ['An unexpected failure; the details are in the service log, never in the answer.', 'Internal server error'] },
  503: {
    AGENT_NOT_INSTALLED: ["The agent's executable is not on the service's PATH.", 'The claude agent is not installed here: claude was not found on PATH'],
    AGENT_SPAWN_FAILED: ["The agent's executable exists but could not be started.", 'The crush agent could not be started: EACCES'],
    SLOTS_UNAVAILABLE: ['SLOTS_BACKEND=redis and Redis does not answer; nothing was started. Retry later.', 'The shared agent slots cannot be reached (Redis): Connection is closed.'],
    RUNS_UNAVAILABLE: ['RUNS_STORE=redis and Redis does not answer: the run cannot be stored, read or reached.', 'The shared run store cannot be reached (Redis): Connection is closed.'],
    SHUTTING_DOWN: ['The service began shutting down before the agent started; nothing was started.', 'The service is shutting down: the run was not started']
  }
} as const satisfies Record<number, Record<string, readonly [when: string, message: string]>>

export type ErrorStatus = keyof typeof ERROR_CODES

export const ErrorResponse = Type.Object(
  {
    statusCode: Type.Integer({ description: 'The HTTP status, repeated.', examples: [429] }),
    error: Type.String({ description: 'The HTTP reason phrase.', examples: ['Too Many Requests'] }),
    code: Type.String({
      // A string, not an enum: a client must not break when a later version adds a code.
      description: `Machine-readable error code: ${Object.values(ERROR_CODES).flatMap((codes) => Object.keys(codes)).join(', ')}.`,
      examples: ['AGENT_LIMIT_REACHED']
    }),
    message: Type.String({ description: 'For people: what went wrong, naming the field or value at fault.', examples: ['Limite de 2 agents atteinte'] })
  },
  {
    $id: 'ErrorResponse',
    title: 'ErrorResponse',
    description: 'The one shape of every error the service answers with.',
    additionalProperties: false
  }
)
export type ErrorResponse = Static<typeof ErrorResponse>

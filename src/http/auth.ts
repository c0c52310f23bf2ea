import bearerAuth from '@fastify/bearer-auth'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { ApiToken } from '../config.js'

/** Who calls when no token is configured: everyone is the same caller (a name no token may take). */
const ANONYMOUS = 'anonymous'

declare module 'fastify' {
  interface FastifyRequest {
    /** The name of the token the request authenticated with (ANONYMOUS without tokens): its runs are its own. */
    caller: string
  }
}

/**
 * The secret exactly as @fastify/bearer-auth reads it to compare (after `Bearer `, trimmed of every Unicode blank):
 * naming the caller any other way would let a secret that authenticated go by another name, or by none.
 */
const presentedSecret = (request: FastifyRequest): string =>
  (request.headers.authorization ?? '').substring('Bearer '.length).trim()

/**
 * Requires `Authorization: Bearer <token>` on every route of the scope it is registered in. Tokens are compared in
 * constant time by @fastify/bearer-auth; a refusal goes through the service's error handler (one error shape) with a
 * WWW-Authenticate challenge. An accepted request is tagged with its token's name, in `request.caller` and its logs.
 */
export async function requireBearerToken(scope: FastifyInstance, tokens: ApiToken[]): Promise<void> {
  scope.decorateRequest('caller', ANONYMOUS)
  if (tokens.length === 0) return
  const names = new Map(tokens.map((token) => [token.secret, token.name]))
  await scope.register(bearerAuth, { keys: new Set(names.keys()), addHook: false, verifyErrorLogLevel: 'info' })
  scope.addHook('onRequest', (request, reply, done) => {
    scope.verifyBearerAuth!(request, reply, (error?: Error) => {
      if (error) {
        reply.header('www-authenticate', 'Bearer realm="agent-runner"')
        return done(error)
      }
      // The secret is known valid here: looking its name up leaks nothing a timing could tell.
      request.caller = names.get(presentedSecret(request)) ?? ANONYMOUS
      request.log = request.log.child({ caller: request.caller })
      done()
    })
  })
}

/** The names whose callers run agents: each token's, or the anonymous caller's alone without tokens. */
export const callerNames = (tokens: ApiToken[]): string[] =>
  tokens.length === 0 ? [ANONYMOUS] : tokens.map((token) => token.name)

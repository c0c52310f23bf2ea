import bearerAuth from '@fastify/bearer-auth'
import type { FastifyInstance } from 'fastify'

/**
 * Requires `Authorization: Bearer <token>` on every route of the scope it is registered in. Tokens are compared in
 * constant time by @fastify/bearer-auth; a refusal goes through the service's error handler (one error shape) with a
 * WWW-Authenticate challenge.
 */
export async function requireBearerToken(scope: FastifyInstance, tokens: string[]): Promise<void> {
  if (tokens.length === 0) return
  await scope.register(bearerAuth, { keys: new Set(tokens), addHook: false, verifyErrorLogLevel: 'info' })
  scope.addHook('onRequest', (request, reply, done) => {
    scope.verifyBearerAuth!(request, reply, (error?: Error) => {
      if (error) reply.header('www-authenticate', 'Bearer realm="agent-runner"')
      done(error)
    })
  })
}

import {
  defaultServerCallContextBuilder, validateVersion, type A2ARequestHandler, type ServerCallContext
} from '@a2a-js/sdk/server'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ToolName } from '../../agents/catalog.js'
import type { AgentTool } from '../../agents/tools.js'
import type { RunRegistry } from '../../runs/registry.js'
import { serviceCard, toolCard, type CardSite } from './cards.js'
import type { RejectionObserver } from '../error-handler.js'
import { guarded } from './guarded.js'
import { RunTasks, withCall } from './handler.js'

/** What one A2A request is answered with, whatever its binding. */
export interface A2aCall {
  request: FastifyRequest
  reply: FastifyReply
  tool: ToolName | undefined
  tools: readonly AgentTool[]
  runs: RunRegistry
  site: CardSite
  heartbeatMs: number
  /** undefined: a Last-Event-ID this service never gives. */
  lastEventId: number | undefined
  /** A refused call counts as a refused REST request does (metrics). */
  onRejection: RejectionObserver
}

/** The agent a call speaks to, its handler, and the SDK's context for the call (who asks, which version). */
export interface Dispatch {
  handler: A2ARequestHandler
  context: ServerCallContext
}

/**
 * The handler and context of a call, once its version is one the agent's card offers on that binding (a request
 * without A2A-Version is a 0.3 client's: refused, as the specification says). Throws the A2A error to answer.
 */
export function dispatch(call: A2aCall, binding: 'JSONRPC' | 'HTTP+JSON', gone: AbortSignal): Dispatch {
  const { request, tools, site } = call
  const tool = tools.find((each) => each.name === call.tool)
  const card = tool === undefined ? serviceCard(tools, site) : toolCard(tool, site)
  const version = request.headers['a2a-version']
  const context = withCall(
    defaultServerCallContextBuilder({
      extensions: undefined,
      user: { isAuthenticated: true, userName: request.caller },
      headers: request.headers,
      requestedVersion: typeof version === 'string' ? version : undefined
    }),
    { caller: request.caller, log: request.log, gone, lastEventId: call.lastEventId ?? 0 }
  )
  validateVersion(context.requestedVersion, card, binding)
  const toolNames = tools.map((each) => each.name)
  const refused = (code: string) => call.onRejection(call.tool ?? 'unknown', code)
  const handler = new RunTasks(call.runs, call.tool, toolNames, card)
  return { handler: guarded(handler, { log: request.log, refused }), context }
}

import { AgentCard } from '@a2a-js/sdk'
import type { AgentTool } from '../../agents/tools.js'
import { serviceCard, toolCard, type CardSite } from './cards.js'

export { answerJsonRpc } from './json-rpc.js'
export { answerHttpJson } from './http-json.js'

/** An agent's card in A2A's JSON form: the service's (`tool` undefined) or one tool's. */
export function cardJson(tools: readonly AgentTool[], tool: AgentTool | undefined, site: CardSite): unknown {
  return AgentCard.toJSON(tool === undefined ? serviceCard(tools, site) : toolCard(tool, site))
}

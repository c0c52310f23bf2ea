import { A2A_PROTOCOL_VERSION, type AgentCard, type AgentSkill, type SecurityScheme } from '@a2a-js/sdk'
import type { AgentTool } from '../../agents/tools.js'

/** Where the service is reached, and what a card says of it whatever the agent. */
export interface CardSite {
  /** The service's absolute URL, without a trailing slash (PUBLIC_URL, else the request's own). */
  baseUrl: string
  /** Tokens are configured: every operation needs one. */
  secured: boolean
  version: string
}

/** The path of an agent's A2A endpoint; its card is under it, at `.well-known/agent-card.json`. */
export const agentPath = (tool?: string): string => (tool === undefined ? '/a2a' : `/a2a/${tool}`)

const BEARER: Record<string, SecurityScheme> = {
  bearer: {
    scheme: {
      $case: 'httpAuthSecurityScheme',
      value: { scheme: 'Bearer', bearerFormat: '', description: 'One of the service’s API tokens (API_TOKENS).' }
    }
  }
}

function skillOf(tool: AgentTool, description: string): AgentSkill {
  return {
    id: tool.name,
    name: tool.spec.summary,
    description,
    tags: ['coding', tool.spec.agent],
    examples: [],
    inputModes: [],
    outputModes: [],
    securityRequirements: []
  }
}

function card(site: CardSite, path: string, head: Pick<AgentCard, 'name' | 'description' | 'skills'>): AgentCard {
  return {
    ...head,
    // JSON-RPC first: the binding a client prefers when it speaks both.
    supportedInterfaces: ['JSONRPC', 'HTTP+JSON'].map((protocolBinding) => ({
      url: `${site.baseUrl}${path}`, protocolBinding, tenant: '', protocolVersion: A2A_PROTOCOL_VERSION
    })),
    provider: { organization: 'agent-runner', url: site.baseUrl },
    version: site.version,
    documentationUrl: `${site.baseUrl}/docs`,
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
    securitySchemes: site.secured ? BEARER : {},
    securityRequirements: site.secured ? [{ schemes: { bearer: { list: [] } } }] : [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain', 'application/json'],
    signatures: []
  }
}

/** One agent's card: its CLI, as an A2A agent whose tasks are its runs. */
export function toolCard(tool: AgentTool, site: CardSite): AgentCard {
  return card(site, agentPath(tool.name), {
    name: `${tool.spec.agent} (agent-runner ${tool.name})`,
    description: tool.spec.description,
    skills: [skillOf(tool, tool.spec.description)]
  })
}

/**
 * The service's card: one agent for every tool, which the message's `metadata.tool` names (as POST /runs's `tool`
 * does); each tool's own card is linked from its skill.
 */
export function serviceCard(tools: readonly AgentTool[], site: CardSite): AgentCard {
  return card(site, agentPath(), {
    name: 'agent-runner',
    description:
      'Hands a task to an AI coding agent CLI and answers with what it did. Name the agent in the message’s ' +
      '`metadata.tool`, or talk to its own card’s endpoint.',
    skills: tools.map((tool) => skillOf(
      tool,
      `${tool.spec.summary} Its own card: ${site.baseUrl}${agentPath(tool.name)}/.well-known/agent-card.json`
    ))
  })
}

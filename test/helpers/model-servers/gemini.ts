import type { ServerResponse } from 'node:http'
import {
  type ModelTurn, type RecordedRequest, type ScriptedModelServer, type WireProtocol, sendJson, startScriptedServer,
  startSse,
  turnFor, writeSse
} from './scripted-server.js'

/** Gemini CLI's shell tool; its declaration (in the request's `tools`) says which arguments it takes. */
const SHELL_TOOL = 'run_shell_command'

/**
 * Answers gemini's utility requests (`generateJson`) must give so it goes on at once: a structured reply it cannot
 * parse or validate is retried with backoff for over a minute. Keyed by property name because the schemas say only
 * the type: the router's score must be 1-100, the next speaker `user` ends the turn, a loop confidence of 0 (below its
 * 0.9 threshold) says there is no loop.
 */
const KNOWN_FIELDS: Record<string, unknown> = {
  complexity_score: 1,
  model_choice: 'flash',
  next_speaker: 'user',
  unproductive_state_confidence: 0
}

type Part = { text: string } | { functionCall: { name: string, args: Record<string, unknown> } }

const asRecord = (value: unknown): Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : {}

const asArray = (value: unknown): unknown[] => Array.isArray(value) ? value : []

const partsOf = (body: unknown): Array<Record<string, unknown>> =>
  asArray(asRecord(body)['contents']).flatMap((content) => asArray(asRecord(content)['parts'])).map(asRecord)

/**
 * What the tool printed, as gemini reports it: `{output}` (run_shell_command's llmContent), or `{error}` when the
 * call itself failed; anything else is kept whole so a test sees what came back.
 */
function functionResponseText(response: unknown): string {
  const record = asRecord(response)
  for (const key of ['output', 'error']) {
    const value = record[key]
    if (typeof value === 'string') return value
  }
  return JSON.stringify(response ?? null)
}

function toolResults(body: unknown): string[] {
  return partsOf(body).map((part) => asRecord(part['functionResponse'])).filter((response) => 'response' in response)
    .map((response) => functionResponseText(response['response']))
}

function shellDeclaration(body: unknown): Record<string, unknown> | undefined {
  return asArray(asRecord(body)['tools']).flatMap(
    (tool) => asArray(asRecord(tool)['functionDeclarations'])
  ).map(asRecord)
    .find((declaration) => declaration['name'] === SHELL_TOOL)
}

/** Arguments shaped by the declaration, so an added optional field is filled only where the tool offers it. */
function shellArgs(declaration: Record<string, unknown>, command: string): Record<string, unknown> {
  const schema = asRecord(declaration['parametersJsonSchema'] ?? declaration['parameters'])
  const properties = asRecord(schema['properties'])
  return 'description' in properties ? { command, description: 'Run the scripted command' } : { command }
}

/** A value of the JSON schema (either casing of `type`, as gemini sends both), with the known fields filled as due. */
function valueFor(schema: Record<string, unknown>, name?: string): unknown {
  if (name !== undefined && name in KNOWN_FIELDS) return KNOWN_FIELDS[name]
  const choices = asArray(schema['enum'])
  if (choices.length > 0) return choices[0]
  switch (String(schema['type']).toLowerCase()) {
    case 'object':
      return Object.fromEntries(
        Object.entries(asRecord(schema['properties'])).map(([key, value]) => [key, valueFor(asRecord(value), key)])
      )
    case 'array': return []
    case 'integer':
    case 'number': return typeof schema['minimum'] === 'number' ? schema['minimum'] : 0
    case 'boolean': return false
    default: return 'Scripted.'
  }
}

/**
 * The main conversation is the one offering the shell tool; the others are gemini's utility requests (routing
 * classifier, next-speaker check, loop detection: JSON of the schema in `generationConfig`; summaries: text).
 */
function replyTo(body: unknown, turns: readonly ModelTurn[]): Part {
  const declaration = shellDeclaration(body)
  if (declaration === undefined) {
    const config = asRecord(asRecord(body)['generationConfig'])
    const schema = config['responseJsonSchema'] ?? config['responseSchema']
    return { text: schema === undefined ? 'Scripted.' : JSON.stringify(valueFor(asRecord(schema))) }
  }
  const turn = turnFor(turns, toolResults(body).length)
  return 'run' in turn
    ? { functionCall: { name: SHELL_TOOL, args: shellArgs(declaration, turn.run) } }
    : { text: turn.say }
}

const usageMetadata = { promptTokenCount: 1, candidatesTokenCount: 1, totalTokenCount: 2 }

/** Gemini API (`generativelanguage`, v1beta) as Gemini CLI speaks it through @google/genai with an API key. */
const geminiApi: WireProtocol = {
  answer: (request: RecordedRequest, turns: readonly ModelTurn[], res: ServerResponse) => {
    const path = request.url.split('?')[0] ?? ''
    // `/<version>/models/<model>:<method>`: the model is whatever gemini routed to, so any is accepted.
    const match = /^\/[^/]+\/models\/([^/:]+):(\w+)$/.exec(path)
    const method = match?.[2]
    if (request.method === 'POST' && method === 'countTokens') {
      sendJson(res, 200, { totalTokens: 1 })
      return
    }
    if (request.method !== 'POST' || (method !== 'generateContent' && method !== 'streamGenerateContent')) {
      sendJson(res, 404, {
        error: { code: 404, message: `scripted server: no ${request.method} ${path}`, status: 'NOT_FOUND' }
      })
      return
    }
    const response = {
      candidates: [
        { content: { role: 'model', parts: [replyTo(request.body, turns)] }, finishReason: 'STOP', index: 0 }
      ],
      usageMetadata,
      modelVersion: match?.[1]
    }
    if (method === 'generateContent') {
      sendJson(res, 200, response)
      return
    }
    startSse(res)
    writeSse(res, response)
    res.end()
  },
  toolResults,
  conversation: (body) => shellDeclaration(body) === undefined ? null : asArray(asRecord(body)['contents'])
}

export const startGeminiServer = (turns: readonly ModelTurn[]): Promise<ScriptedModelServer> =>
  startScriptedServer(geminiApi, turns)

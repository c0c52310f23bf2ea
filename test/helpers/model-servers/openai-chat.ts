import type { ServerResponse } from 'node:http'
import {
  type ModelTurn, type RecordedRequest, type ScriptedModelServer, type WireProtocol, sendJson, startScriptedServer,
  startSse, turnFor, writeSse
} from './scripted-server.js'

/** The model id the server lists; any id is accepted on a request, this one is for CLIs that look before they ask. */
const CHAT_MODEL_ID = 'scripted-model'

/** Names under which the CLIs speaking this protocol offer their shell tool (opencode: `bash`). */
const SHELL_TOOL_NAMES = ['bash', 'shell', 'run_shell_command', 'execute_command']

/**
 * What a side request (title, summary: no shell tool offered) gets, so it ends at once and never consumes the
 * script.
 */
const SIDE_REPLY = 'Scripted session'

interface ToolCall { name: string, arguments: string }

type Answer = { text: string } | { call: ToolCall }

const asRecord = (value: unknown): Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : {}

const asArray = (value: unknown): unknown[] => Array.isArray(value) ? value : []

function messagesOf(body: unknown): Array<Record<string, unknown>> {
  return asArray(asRecord(body).messages).map(asRecord)
}

/** Tool message content is a string, or (some SDKs) an array of text parts. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content
  return asArray(content).map((part) => {
    const text = asRecord(part).text
    return typeof text === 'string' ? text : ''
  }).join('')
}

/** The shell tool offered in the request, as `{name, parameters}` (the JSON schema), if any. */
function shellToolOf(body: unknown): { name: string, parameters: Record<string, unknown> } | undefined {
  for (const tool of asArray(asRecord(body).tools)) {
    const fn = asRecord(asRecord(tool).function)
    if (typeof fn.name === 'string' && SHELL_TOOL_NAMES.includes(fn.name)) {
      return { name: fn.name, parameters: asRecord(fn.parameters) }
    }
  }
  return undefined
}

/**
 * Arguments for the offered shell tool, shaped by its schema rather than hard-coded: opencode's `bash` has taken
 * `{command, description}` in some versions and `{command, timeout, workdir}` in 1.18.33, and a call that misses a
 * required field comes back as a schema error in place of the command's output.
 */
function shellArguments(parameters: Record<string, unknown>, command: string): string {
  const properties = asRecord(parameters.properties)
  const args: Record<string, unknown> = {}
  args.command = asRecord(properties.command).type === 'array' ? ['bash', '-lc', command] : command
  if ('description' in properties) args.description = 'Run the scripted command'
  return JSON.stringify(args)
}

function decide(body: unknown, turns: readonly ModelTurn[]): Answer {
  const shell = shellToolOf(body)
  if (shell === undefined) return { text: SIDE_REPLY }
  const turn = turnFor(turns, openaiChat.toolResults(body).length)
  if ('say' in turn) return { text: turn.say }
  return { call: { name: shell.name, arguments: shellArguments(shell.parameters, turn.run) } }
}

const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }

function streamAnswer(res: ServerResponse, model: string, id: string, callId: string, answer: Answer): void {
  const created = Math.floor(Date.now() / 1000)
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}): unknown =>
    ({ id, object: 'chat.completion.chunk', created, model, choices, ...extra })
  startSse(res)
  writeSse(res, chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]))
  if ('text' in answer) {
    writeSse(res, chunk([{ index: 0, delta: { content: answer.text }, finish_reason: null }]))
    writeSse(res, chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]))
  } else {
    // Name first, arguments in a later delta, as real servers stream them: a client must assemble the call.
    writeSse(res, chunk([{
      index: 0,
      delta: {
        tool_calls: [{ index: 0, id: callId, type: 'function', function: { name: answer.call.name, arguments: '' } }]
      },
      finish_reason: null
    }]))
    writeSse(res, chunk([{
      index: 0,
      delta: { tool_calls: [{ index: 0, function: { arguments: answer.call.arguments } }] },
      finish_reason: null
    }]))
    writeSse(res, chunk([{ index: 0, delta: {}, finish_reason: 'tool_calls' }]))
  }
  writeSse(res, chunk([], { usage }))
  res.end('data: [DONE]\n\n')
}

function jsonAnswer(res: ServerResponse, model: string, id: string, callId: string, answer: Answer): void {
  const message = 'text' in answer
    ? { role: 'assistant', content: answer.text }
    : { role: 'assistant', content: null, tool_calls: [{ id: callId, type: 'function', function: answer.call }] }
  sendJson(res, 200, {
    id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, finish_reason: 'text' in answer ? 'stop' : 'tool_calls' }],
    usage
  })
}

/** OpenAI Chat Completions, as opencode's openai-compatible provider speaks it. */
const openaiChat: WireProtocol = {
  answer(request: RecordedRequest, turns: readonly ModelTurn[], res: ServerResponse): void {
    const path = request.url.split('?')[0] ?? ''
    if (request.method === 'GET' && path.endsWith('/models')) {
      sendJson(res, 200, {
        object: 'list', data: [{ id: CHAT_MODEL_ID, object: 'model', created: 0, owned_by: 'scripted' }]
      })
      return
    }
    if (request.method !== 'POST' || !path.endsWith('/chat/completions')) {
      sendJson(res, 404, { error: { message: `scripted server: no ${request.method} ${path}`, type: 'not_found' } })
      return
    }
    const body = asRecord(request.body)
    const model = typeof body.model === 'string' ? body.model : CHAT_MODEL_ID
    const resultCount = openaiChat.toolResults(body).length
    // Ids derived from the conversation, not a counter: a retried request gets the same call id it would have had.
    const id = `chatcmpl-scripted-${resultCount}`
    const callId = `call_scripted_${resultCount}`
    const answer = decide(body, turns)
    if (body.stream === true) streamAnswer(res, model, id, callId, answer)
    else jsonAnswer(res, model, id, callId, answer)
  },
  toolResults(body: unknown): string[] {
    return messagesOf(body).filter((message) => message.role === 'tool').map((message) => textOf(message.content))
  },
  conversation: (body) => shellToolOf(body) === undefined ? null : messagesOf(body)
}

export const startChatServer = (turns: readonly ModelTurn[]): Promise<ScriptedModelServer> =>
  startScriptedServer(openaiChat, turns)

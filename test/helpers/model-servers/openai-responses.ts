import type { ServerResponse } from 'node:http'
import {
  sendJson, startScriptedServer, startSse, turnFor, writeSse, type ModelTurn, type RecordedRequest, type WireProtocol
} from './scripted-server.js'

type Item = Record<string, unknown>

const isItem = (value: unknown): value is Item => typeof value === 'object' && value !== null && !Array.isArray(value)

const items = (body: unknown, key: string): Item[] => {
  const list = isItem(body) ? body[key] : undefined
  return Array.isArray(list) ? list.filter(isItem) : []
}

/** The kinds of input item that carry what a tool printed back to the model. */
const TOOL_OUTPUTS = new Set(['function_call_output', 'custom_tool_call_output', 'local_shell_call_output'])

/** A tool output is a plain string, or (for newer CLIs, and for images) a list of content parts. */
function outputText(output: unknown): string {
  if (typeof output === 'string') return output
  if (Array.isArray(output)) {
    return output.map((part) => isItem(part) && typeof part['text'] === 'string' ? part['text'] : '').join('')
  }
  if (isItem(output)) return outputText(output['content'] ?? output['output'])
  return ''
}

const toolResults = (body: unknown): string[] =>
  items(body, 'input').filter(
    (item) => TOOL_OUTPUTS.has(String(item['type']))
  ).map((item) => outputText(item['output']))

/**
 * The output item that makes the CLI run `command` with its own shell tool, shaped for whichever of the shell tools
 * codex has shipped the request offers (0.171.0 offers only `exec_command`); null when it offers none.
 */
function shellCall(tools: Item[], command: string, callId: string): Item | null {
  const call = (name: string, args: unknown): Item =>
    ({
      type: 'function_call',
      id: `fc_${callId}`,
      call_id: callId,
      name,
      arguments: JSON.stringify(args),
      status: 'completed'
    })
  const names = new Set(tools.filter((tool) => tool['type'] === 'function').map((tool) => tool['name']))
  // Unified exec returns whatever the command printed after yield_time_ms (default 10 s) and leaves it running as a
  // session the model would have to poll; the maximum lets a test's slower commands finish within their one call.
  if (names.has('exec_command')) return call('exec_command', { cmd: command, yield_time_ms: 30_000 })
  if (names.has('shell_command')) return call('shell_command', { command })
  if (names.has('shell')) return call('shell', { command: ['bash', '-lc', command] })
  if (tools.some((tool) => tool['type'] === 'local_shell')) {
    return {
      type: 'local_shell_call',
      id: `lsh_${callId}`,
      call_id: callId,
      status: 'completed',
      action: { type: 'exec', command: ['bash', '-lc', command] }
    }
  }
  return null
}

const message = (id: string, text: string): Item =>
  ({
    type: 'message',
    id,
    role: 'assistant',
    status: 'completed',
    content: [{ type: 'output_text', text, annotations: [] }]
  })

/**
 * One streamed response holding a single output item, with the events codex acts on: it takes items from
 * output_item.done, text from output_text.delta, and fails (then retries) a stream that ends without
 * response.completed.
 */
function streamResponse(res: ServerResponse, model: unknown, id: string, item: Item, text?: string): void {
  const event = (data: Item): void => { writeSse(res, data, String(data['type'])) }
  const response = { id, object: 'response', model, status: 'in_progress', output: [] }
  startSse(res)
  event({ type: 'response.created', response })
  event({
    type: 'response.output_item.added',
    output_index: 0,
    item: text === undefined ? item : { ...item, status: 'in_progress', content: [] }
  })
  if (text !== undefined) {
    event({ type: 'response.output_text.delta', item_id: item['id'], output_index: 0, content_index: 0, delta: text })
    event({ type: 'response.output_text.done', item_id: item['id'], output_index: 0, content_index: 0, text })
  }
  event({ type: 'response.output_item.done', output_index: 0, item })
  const usage = {
    input_tokens: 10,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: 5,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 15
  }
  event({ type: 'response.completed', response: { ...response, status: 'completed', output: [item], usage } })
  res.end()
}

/**
 * OpenAI's Responses API as codex speaks it: every model turn is a streamed POST to /v1/responses, and the tool
 * results come back as function_call_output items in the next request's `input` (codex sends the whole conversation
 * each time, `store` being false). codex 0.171.0 calls nothing else here (no /models, no side requests): anything
 * else gets a 404 that names it.
 */
const openaiResponses: WireProtocol = {
  answer(request: RecordedRequest, turns: readonly ModelTurn[], res: ServerResponse): void {
    const path = request.url.split('?')[0] ?? ''
    if (request.method !== 'POST' || !path.endsWith('/responses')) {
      sendJson(res, 404, {
        error: { message: `no scripted answer for ${request.method} ${path}`, type: 'invalid_request_error' }
      })
      return
    }
    const done = toolResults(request.body).length
    const turn = turnFor(turns, done)
    const model = isItem(request.body) ? request.body['model'] : undefined
    const id = `resp_${done}`
    const say = (text: string): void => { streamResponse(res, model, id, message(`msg_${done}`, text), text) }
    if ('say' in turn) {
      say(turn.say)
      return
    }
    const call = shellCall(items(request.body, 'tools'), turn.run, `call_${done}`)
    if (call === null) say(`the request offered no shell tool to run: ${turn.run}`)
    else streamResponse(res, model, id, call)
  },
  toolResults,
  // A request offering no shell tool gets a message saying so: it is no turn of the script.
  conversation: (body) => shellCall(items(body, 'tools'), '', '') === null ? null : items(body, 'input')
}

export const startResponsesServer = (turns: readonly ModelTurn[]) => startScriptedServer(openaiResponses, turns)

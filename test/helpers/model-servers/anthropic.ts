import { randomUUID } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import {
  type ModelTurn, type RecordedRequest, type WireProtocol, sendJson, startScriptedServer, startSse, turnFor, writeSse
} from './scripted-server.js'

type Block = { type: 'text', text: string } | {
  type: 'tool_use'
  id: string
  name: string
  input: Record<string, unknown>
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null

const list = (value: unknown): unknown[] => Array.isArray(value) ? value : []

// Ids must differ across requests: claude pairs each tool_result with its tool_use by id over the whole conversation.
const newId = (prefix: string): string => `${prefix}_${randomUUID().replaceAll('-', '')}`

function toolResultText(content: unknown): string {
  if (typeof content === 'string') return content
  return list(content).map((part) => isRecord(part) && typeof part['text'] === 'string' ? part['text'] : '').join('\n')
}

function toolResults(body: unknown): string[] {
  if (!isRecord(body)) return []
  return list(body['messages']).flatMap((message) => isRecord(message) ? list(message['content']) : [])
    .filter((block): block is Record<string, unknown> => isRecord(block) && block['type'] === 'tool_result')
    .map((block) => toolResultText(block['content']))
}

/**
 * The main conversation is the one that offers the Bash tool; claude's side requests (titles, topic detection,
 * summaries, quota checks) offer none and only need some text back.
 */
const offersBash = (body: unknown): boolean =>
  isRecord(body) && list(body['tools']).some((tool) => isRecord(tool) && tool['name'] === 'Bash')

function replyTo(body: Record<string, unknown>, turns: readonly ModelTurn[]): Block {
  if (!offersBash(body)) return { type: 'text', text: 'ok' }
  const turn = turnFor(turns, toolResults(body).length)
  return 'run' in turn
    ? {
        type: 'tool_use',
        id: newId('toolu'),
        name: 'Bash',
        input: { command: turn.run, description: 'Run the scripted command' }
      }
    : { type: 'text', text: turn.say }
}

function streamMessage(res: ServerResponse, message: Record<string, unknown>, block: Block): void {
  startSse(res)
  writeSse(res, { type: 'message_start', message: { ...message, content: [], stop_reason: null } }, 'message_start')
  if (block.type === 'text') {
    writeSse(
      res, { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'
    )
    writeSse(
      res, { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: block.text } },
      'content_block_delta'
    )
  } else {
    writeSse(
      res, { type: 'content_block_start', index: 0, content_block: { ...block, input: {} } }, 'content_block_start'
    )
    writeSse(
      res,
      {
        type: 'content_block_delta',
        index: 0,
        delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) }
      },
      'content_block_delta'
    )
  }
  writeSse(res, { type: 'content_block_stop', index: 0 }, 'content_block_stop')
  writeSse(
    res,
    {
      type: 'message_delta',
      delta: { stop_reason: message['stop_reason'], stop_sequence: null },
      usage: { output_tokens: 1 }
    },
    'message_delta'
  )
  writeSse(res, { type: 'message_stop' }, 'message_stop')
  res.end()
}

/** Anthropic's Messages API, as Claude Code speaks it (streaming or not, with or without `?beta=true`). */
const anthropicMessages: WireProtocol = {
  answer: (request: RecordedRequest, turns: readonly ModelTurn[], res: ServerResponse) => {
    const path = request.url.split('?')[0]
    const body = isRecord(request.body) ? request.body : {}
    if (request.method === 'POST' && path === '/v1/messages/count_tokens') {
      sendJson(res, 200, { input_tokens: 1 })
      return
    }
    if (request.method !== 'POST' || path !== '/v1/messages') {
      sendJson(res, 404, {
        type: 'error', error: { type: 'not_found_error', message: `${request.method} ${request.url}: not scripted` }
      })
      return
    }
    const block = replyTo(body, turns)
    const message = {
      id: newId('msg'),
      type: 'message',
      role: 'assistant',
      model: typeof body['model'] === 'string' ? body['model'] : 'scripted',
      content: [block],
      stop_reason: block.type === 'tool_use' ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 1, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
    }
    if (body['stream'] === true) streamMessage(res, message, block)
    else sendJson(res, 200, message)
  },
  toolResults,
  conversation: (body) => offersBash(body) && isRecord(body) ? list(body['messages']) : null
}

export const startAnthropicServer = (turns: readonly ModelTurn[]) => startScriptedServer(anthropicMessages, turns)

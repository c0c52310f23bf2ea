import type { RunEvent } from '../generated/openapi.js'

// The two streamed forms of a run's events, read as a client reads them: NDJSON (one event per line) and SSE frames.

type OutputEvent = Extract<RunEvent, { type: 'output' }>
export type ResultEvent = Extract<RunEvent, { type: 'result' }>

/** A response body (fetch's, or a node:http IncomingMessage), line by line as it arrives. */
async function* lines(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder()
  let pending = ''
  for await (const chunk of body) {
    pending += decoder.decode(chunk, { stream: true })
    const complete = pending.split('\n')
    pending = complete.pop()!
    yield* complete
  }
  pending += decoder.decode()
  if (pending !== '') yield pending
}

/** An NDJSON stream, event by event as it arrives. */
export async function* ndjson(body: AsyncIterable<Uint8Array>): AsyncGenerator<RunEvent> {
  for await (const line of lines(body)) if (line !== '') yield JSON.parse(line) as RunEvent
}

/** A whole NDJSON answer. */
export const parseNdjson = (text: string): RunEvent[] =>
  text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as RunEvent)

export interface SseFrame {
  id?: string
  event: string
  data: RunEvent
}

/** A whole SSE answer, frame by frame. */
export function parseSse(text: string): SseFrame[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const fields = Object.fromEntries(
        block.split('\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)])
      )
      const frame: SseFrame = { event: fields['event']!, data: JSON.parse(fields['data']!) as RunEvent }
      if (fields['id'] !== undefined) frame.id = fields['id']
      return frame
    })
}

/** Reads a streamed body until `pattern` shows up in its text, then stops reading (and cancels the rest). */
export async function readUntil(response: Response, pattern: RegExp): Promise<string> {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let text = ''
  while (!pattern.test(text)) {
    const { value, done } = await reader.read()
    if (done) break
    text += decoder.decode(value, { stream: true })
  }
  await reader.cancel()
  return text
}

export const outputs = (events: RunEvent[]): OutputEvent[] =>
  events.filter((event): event is OutputEvent => event.type === 'output')

/** The agent's output as the events carried it. */
export const outputText = (events: RunEvent[]): string => outputs(events).map((event) => event.data).join('')

/** How many whole lines the output events carry: the parts of a `gated` stand-in seen, however its writes were read. */
export const linesIn = (events: RunEvent[]): number => outputText(events).split('\n').length - 1

/** How many bytes of the agent's output the events carried. */
export const outputBytes = (events: RunEvent[]): number =>
  outputs(events).reduce((sum, event) => sum + Buffer.byteLength(event.data), 0)

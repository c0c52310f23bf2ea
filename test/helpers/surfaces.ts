import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { RunParams, RunResult } from '../generated/openapi.js'
import { createRun, getRun, openStream, runTool, type RunEvent, type ToolName } from './api.js'
import { parseNdjson, parseSse } from './streams.js'

/**
 * Every way a caller can run a task and read its result: the JSON answer, the NDJSON stream, an async run followed
 * over SSE to its end, and an MCP tools/call. A promise holds only if it holds on each.
 */
export const SURFACES = ['json', 'ndjson', 'async', 'mcp'] as const
export type Surface = (typeof SURFACES)[number]

export interface SurfaceRun {
  result: RunResult
  /** The events a follower received (NDJSON, SSE), or the MCP progress notifications' messages: what was live. */
  live: string
}

type Headers = Record<string, string>

const resultOf = (events: RunEvent[], surface: string): RunResult => {
  const last = events.at(-1)
  if (last?.type !== 'result') {
    throw new Error(`${surface}: the stream did not end with a result: ${JSON.stringify(last)}`)
  }
  return last.result
}

async function followed(base: string, tool: ToolName, params: RunParams, headers: Headers): Promise<SurfaceRun> {
  const { id } = await createRun(base, { tool, ...params }, headers)
  const response = await fetch(`${base}/runs/${id}/events`, { headers: { accept: 'text/event-stream', ...headers } })
  const live = await response.text()
  const events = parseSse(live).map((frame) => frame.data)
  const result = resultOf(events, 'async')
  const state = await getRun(base, id, headers)
  if (JSON.stringify(state.result) !== JSON.stringify(result)) {
    throw new Error(`async: GET /runs/${id} says otherwise: ${JSON.stringify(state)}`)
  }
  return { result, live }
}

async function throughMcp(base: string, tool: ToolName, params: RunParams, headers: Headers): Promise<SurfaceRun> {
  const client = new Client({ name: 'agent-runner-test', version: '0.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers } }))
  const progress: string[] = []
  try {
    const answer = await client.callTool({ name: tool, arguments: params }, undefined, {
      onprogress: (notification) => { progress.push(notification.message ?? '') },
      timeout: (params.timeout ?? 1800) * 1000 + 30_000
    })
    return { result: answer.structuredContent as RunResult, live: progress.join('') }
  } finally {
    await client.close()
  }
}

/** Runs `params` on a listening service through one surface; any refusal is an error (the caller expects a run). */
export async function runThrough(
  surface: Surface, base: string, tool: ToolName, params: RunParams, headers: Headers = {}
): Promise<SurfaceRun> {
  switch (surface) {
    case 'json':
      return { result: await runTool(base, tool, params, headers), live: '' }
    case 'ndjson': {
      const response = await openStream(base, tool, params)
      if (response.status !== 200) throw new Error(`ndjson: ${response.status} ${await response.text()}`)
      const live = await response.text()
      return { result: resultOf(parseNdjson(live), 'ndjson'), live }
    }
    case 'async':
      return followed(base, tool, params, headers)
    case 'mcp':
      return throughMcp(base, tool, params, headers)
  }
}

import { claude } from './claude.js'
import { codex } from './codex.js'
import { crush } from './crush.js'
import { gemini } from './gemini.js'
import { opencode } from './opencode.js'
import type { AgentSpec } from './spec.js'

/** The agents this service runs: adding one is adding its file here. */
export const BUILT_IN_AGENTS = [crush, claude, gemini, codex, opencode] as const satisfies readonly AgentSpec[]

/** A tool's name, `<agent>_run`: one per agent of the catalog. */
export type ToolName = `${(typeof BUILT_IN_AGENTS)[number]['agent']}_run`

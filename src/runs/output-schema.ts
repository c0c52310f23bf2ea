import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js'
import { RE2JS } from 're2js'
import { serviceError } from '../errors.js'
import type { RunResult, StructuredOutputError } from '../schemas/run.js'

/** A schema is a request's field: 64 KiB of JSON at most (it is also written into the prompt). */
export const OUTPUT_SCHEMA_MAX_BYTES = 64 * 1024
/** Only the answer's end is searched for its last JSON object: an answer may be megabytes of prose before it. */
const SEARCHED_BYTES = 256 * 1024
/** Objects tried, from the end: each try parses to the end, so an answer of braces alone stays cheap. */
const TRIES = 200
/** Ajv's first errors: what a caller needs to see why, not every consequence of one mistake. */
const ERRORS_KEPT = 5

/**
 * ECMAScript's `\uXXXX` and `\u{X}` escapes as RE2 writes them (`\x{X}`); every other escape is kept as it is (the
 * pattern is read escape by escape, so an escaped backslash before a `u` stays one).
 */
export const re2Syntax = (pattern: string): string =>
  pattern.replace(/\\(?:u\{([0-9A-Fa-f]+)\}|u([0-9A-Fa-f]{4})|[\s\S])/g,
    (escape, braced: string | undefined, four: string | undefined) => {
      const code = braced ?? four
      return code === undefined ? escape : `\\x{${code}}`
    })

/**
 * A schema's `pattern` and `patternProperties` run on RE2, in time linear in the text: a backtracking pattern such as
 * `(x+x+)+y` on the service's own engine held it for minutes. What RE2 cannot run is refused when the schema is given.
 */
function re2(pattern: string): RE2JS {
  try {
    return RE2JS.compile(re2Syntax(pattern))
  } catch (error) {
    throw new Error(`pattern ${JSON.stringify(pattern)} is not one RE2 runs (patterns are matched in linear time: ` +
      `no backreferences, no lookahead or lookbehind): ${(error as Error).message}`)
  }
}

// strict: a schema with an unknown keyword or a contradiction is refused (400) rather than silently half-applied.
// `code` names the engine in standalone code, which is never generated here.
const ajv = new Ajv2020({
  strict: true, allErrors: false, addUsedSchema: false, code: { regExp: Object.assign(re2, { code: 're2' }) }
})

/** A request's `output_schema`, compiled; 400 BAD_OUTPUT_SCHEMA for one Ajv cannot compile, or too large. */
export function compileOutputSchema(schema: object): ValidateFunction {
  const bytes = Buffer.byteLength(JSON.stringify(schema))
  if (bytes > OUTPUT_SCHEMA_MAX_BYTES) {
    throw serviceError('BAD_OUTPUT_SCHEMA', `${bytes} bytes, over ${OUTPUT_SCHEMA_MAX_BYTES}`)
  }
  try {
    return ajv.compile(schema)
  } catch (error) {
    throw serviceError('BAD_OUTPUT_SCHEMA', (error as Error).message)
  } finally {
    // Each request's schema compiled once: none is kept in Ajv's cache for the life of the service.
    ajv.removeSchema(schema)
  }
}

/**
 * The prompt of a run with an output schema: its task, byte for byte, then a fixed request to end with a JSON object
 * that matches the schema.
 */
export const promptWithSchema = (task: string, schema: object): string =>
  `${task}\n\n---\nWhen you have finished, end your reply with a single JSON object that validates against this ` +
  `JSON Schema (2020-12), and write nothing after it:\n${JSON.stringify(schema)}\n`

/** What one argv element may hold on Linux (MAX_ARG_STRLEN, 128 KiB), with room: the bound the task alone keeps. */
const ARGV_ELEMENT_MAX_BYTES = 120_000

/**
 * A CLI that takes its task as one argv element (crush) cannot take a prompt longer than one may hold: a task and a
 * schema each within their bounds can be, together. Refused (400) before anything runs, rather than failing to spawn.
 */
function assertPromptFitsArgv(prompt: string): void {
  const bytes = Buffer.byteLength(prompt)
  if (bytes > ARGV_ELEMENT_MAX_BYTES) {
    throw serviceError(
      'BAD_OUTPUT_SCHEMA',
      `the task and the schema together are ${bytes} bytes, over the ${ARGV_ELEMENT_MAX_BYTES} this agent takes on ` +
        'its command line'
    )
  }
}

/** Where a trailing fence closes what the object was written in (```json … ```). */
const TRAILING_FENCE = /\s*```\s*$/

/**
 * The last JSON object an answer ends with (whitespace and a closing code fence after it allowed): the longest
 * parseable text from a `{` to the end, tried from the last `{` backwards. undefined when the answer ends otherwise.
 */
export function lastJsonObject(answer: string): unknown {
  const text = answer.slice(-SEARCHED_BYTES).replace(TRAILING_FENCE, '').trimEnd()
  if (!text.endsWith('}')) return undefined
  let found: unknown
  let tries = 0
  for (let at = text.lastIndexOf('{'); at !== -1 && tries < TRIES; at = at === 0 ? -1 : text.lastIndexOf('{', at - 1)) {
    tries++
    try {
      found = JSON.parse(text.slice(at))
    } catch {
      continue
    }
    if (typeof found === 'object' && found !== null && !Array.isArray(found)) return found
  }
  return undefined
}

const described = (errors: readonly ErrorObject[]): StructuredOutputError['schema_errors'] =>
  errors.slice(0, ERRORS_KEPT).map((error) => ({ instance_path: error.instancePath, message: error.message ?? '' }))

/** What an answer's check found: the object it ends with, valid, or why there is none. */
export type StructuredRead = { value: unknown } | { error: StructuredOutputError }

/** The answer's structured output, checked against its schema: the object, or why there is none. */
export function structuredOutput(answer: string, validate: ValidateFunction): StructuredRead {
  const value = lastJsonObject(answer)
  if (value === undefined) {
    return {
      error: {
        code: 'OUTPUT_SCHEMA_MISMATCH', message: 'the answer does not end with a JSON object', schema_errors: []
      }
    }
  }
  if (validate(value)) return { value }
  return {
    error: {
      code: 'OUTPUT_SCHEMA_MISMATCH',
      message: 'the JSON object the answer ends with does not match output_schema',
      schema_errors: described(validate.errors ?? [])
    }
  }
}

/** What a run with an `output_schema` asks its agent, and how its answer is read: checked before anything runs. */
export interface OutputCheck {
  /** The task, byte for byte, and after it (with a schema) the request for a final object. */
  prompt: string
  /** The result with the object its answer ended with, or not ok for want of one that validates. */
  checked(result: RunResult): Promise<RunResult>
}

/** Where an answer is checked against its schema: off the service's thread, in bounded time (output-checks.ts). */
export type CheckAnswer = (answer: string, schema: object) => Promise<StructuredRead>

/**
 * A run's prompt and how its answer is checked: the schema compiled, and for a CLI that takes its task on its command
 * line (`taskInArgv`) the prompt measured; 400 BAD_OUTPUT_SCHEMA either way before any slot. Only the answer's end is
 * handed to `check`: the rest is never searched.
 */
export function outputCheck(
  task: string, schema: object | undefined, taskInArgv: boolean, check: CheckAnswer
): OutputCheck {
  if (schema === undefined) return { prompt: task, checked: async (result) => result }
  compileOutputSchema(schema)
  const prompt = promptWithSchema(task, schema)
  if (taskInArgv) assertPromptFitsArgv(prompt)
  return {
    prompt,
    checked: async (result) => {
      const read = await check(result.output.slice(-SEARCHED_BYTES), schema)
      return 'value' in read
        ? { ...result, structured_output: read.value }
        : { ...result, ok: false, error: read.error }
    }
  }
}

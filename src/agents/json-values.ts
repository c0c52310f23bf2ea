/** Reading what an agent printed as JSON, where anything may be missing or of another type. */
export const textOf = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined)

export const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/** A schema as @fastify/swagger writes it into the document: each `const` as the one-value `enum` it means. */
export function constAsEnum(schema: object): unknown {
  return JSON.parse(JSON.stringify(schema), (_key, value) => {
    if (value === null || typeof value !== 'object' || !('const' in value)) return value
    const { const: only, ...rest } = value
    return { ...rest, enum: [only] }
  })
}

import { Type, type Static } from '@sinclair/typebox'
import { ERROR_CATALOG, exampleMessage, type ErrorCode } from '../errors.js'

type Catalog = typeof ERROR_CATALOG
type DocumentedCode = { [C in ErrorCode]: Catalog[C] extends { unread: true } ? never : C }[ErrorCode]
export type ErrorStatus = Catalog[DocumentedCode]['status']

/**
 * The error catalog by status, as the OpenAPI responses, their examples and the documents' tables show it: each code
 * with when it happens and a message it may carry. A code nobody reads (the client is gone) is not documented.
 */
export const ERROR_CODES = (() => {
  const byStatus: Partial<Record<ErrorStatus, Record<string, readonly [when: string, message: string]>>> = {}
  for (const code of Object.keys(ERROR_CATALOG) as ErrorCode[]) {
    const entry = ERROR_CATALOG[code]
    if ('unread' in entry) continue
    const status = entry.status
    byStatus[status] = { ...byStatus[status], [code]: [entry.when, exampleMessage(code)] }
  }
  return byStatus as Record<ErrorStatus, Record<string, readonly [when: string, message: string]>>
})()

const documentedCodes = Object.values(ERROR_CODES).flatMap((codes) => Object.keys(codes))

export const ErrorResponse = Type.Object(
  {
    statusCode: Type.Integer({ description: 'The HTTP status, repeated.', examples: [429] }),
    error: Type.String({ description: 'The HTTP reason phrase.', examples: ['Too Many Requests'] }),
    code: Type.Unsafe<string>(Type.String({
      // Generated clients type it as this union; a later version may add codes, which a client reads by the status.
      enum: documentedCodes,
      description: 'Machine-readable error code: one of the catalog’s (the table in this document), for programs.',
      examples: ['AGENT_LIMIT_REACHED']
    })),
    message: Type.String({
      description: 'For people: what went wrong, naming the field or value at fault.',
      examples: ['Limite de 2 agents atteinte']
    })
  },
  {
    $id: 'ErrorResponse',
    title: 'ErrorResponse',
    description: 'The one shape of every error the service answers with.',
    additionalProperties: false
  }
)
export type ErrorResponse = Static<typeof ErrorResponse>

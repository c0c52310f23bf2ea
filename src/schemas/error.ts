import { Type, type Static } from '@sinclair/typebox'

export const ErrorResponse = Type.Object({
  statusCode: Type.Integer(),
  error: Type.String({ description: 'The HTTP reason phrase.' }),
  code: Type.String({ description: 'Machine-readable error code, e.g. VALIDATION_ERROR, AGENT_LIMIT_REACHED.' }),
  message: Type.String()
})
export type ErrorResponse = Static<typeof ErrorResponse>

import { serviceError } from '../../errors.js'
import { a2aErrorOf } from './errors.js'

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/** A field that, when given, must be a JSON object: the SDK's converters read it as one and fail on anything else. */
function objectField(
  holder: Record<string, unknown>, field: string, path: string
): Record<string, unknown> | undefined {
  const value = holder[field]
  if (value === undefined || value === null) return undefined
  if (!isObject(value)) throw a2aErrorOf(serviceError('VALIDATION_ERROR', `${path}/${field}: an object`))
  return value
}

/** A push-notification config's objects. */
function checkPushConfig(config: Record<string, unknown> | undefined, path: string): void {
  if (config !== undefined) objectField(config, 'authentication', path)
}

/**
 * What a message or a push config must be before the SDK converts it: objects where A2A has objects (a part of
 * `null` or `5` made its converters throw, answered as a 500). Other refusals (no text part, an empty URL) are the
 * handler's, with the service's messages.
 */
export function checkParamsShape(operation: 'send' | 'create-config', params: unknown, path = 'params'): void {
  if (!isObject(params)) throw a2aErrorOf(serviceError('VALIDATION_ERROR', `${path}: an object`))
  if (operation === 'create-config') return checkPushConfig(params, path)
  objectField(params, 'metadata', path)
  const configuration = objectField(params, 'configuration', path)
  if (configuration !== undefined) {
    const push = 'taskPushNotificationConfig'
    checkPushConfig(objectField(configuration, push, `${path}/configuration`), `${path}/configuration/${push}`)
  }
  const message = objectField(params, 'message', path)
  if (message === undefined) return
  objectField(message, 'metadata', `${path}/message`)
  const parts = message['parts']
  if (!Array.isArray(parts)) return
  parts.forEach((part: unknown, index) => {
    const at = `${path}/message/parts/${String(index)}`
    if (!isObject(part)) throw a2aErrorOf(serviceError('VALIDATION_ERROR', `${at}: an object`))
    for (const field of ['metadata', 'file', 'data']) objectField(part, field, at)
  })
}

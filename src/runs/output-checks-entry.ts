import { parentPort } from 'node:worker_threads'
import type { FromOutputChecks, ToOutputChecks } from './output-checks.js'
import { compileOutputSchema, structuredOutput } from './output-schema.js'

// The thread answers are checked on (output-checks.ts): each answer's end against its schema, compiled here again
// (a compiled schema is code, which no message carries).
const port = parentPort!
const tell = (message: FromOutputChecks): void => { port.postMessage(message) }

port.on('message', (message: ToOutputChecks) => {
  if (message.type === 'close') return port.close()
  tell({ type: 'read', read: structuredOutput(message.answer, compileOutputSchema(message.schema)) })
})
tell({ type: 'ready' })

import t from 'tap'
import { HeadTailBuffer } from '#src/process/head-tail-buffer.js'

const feed = (limit: number, chunks: string[]): HeadTailBuffer => {
  const buffer = new HeadTailBuffer(limit)
  for (const chunk of chunks) buffer.push(Buffer.from(chunk))
  return buffer
}

t.test('under the limit everything is kept as written', async (t) => {
  const buffer = feed(10, ['abc', 'def', 'ghij'])
  t.equal(buffer.toString(), 'abcdefghij')
  t.equal(buffer.truncated, false)
  t.equal(buffer.totalBytes, 10)
})

t.test('over the limit the head and the tail are kept, with a marker and the total', async (t) => {
  const buffer = feed(10, ['01234', '56789', 'abcdefghij', 'KLMNO'])
  t.equal(buffer.truncated, true)
  t.equal(buffer.totalBytes, 25)
  t.equal(buffer.toString(), '01234\n[… 15 bytes omitted by agent-runner …]\nKLMNO')
})

t.test('the tail is right whatever the chunk sizes, including chunks larger than the tail', async (t) => {
  const text = Array.from({ length: 500 }, (_, index) => String.fromCharCode(65 + (index % 26))).join('')
  for (const size of [1, 3, 7, 64, 499]) {
    const chunks: string[] = []
    for (let offset = 0; offset < text.length; offset += size) chunks.push(text.slice(offset, offset + size))
    const output = feed(100, chunks).toString()
    t.ok(output.startsWith(text.slice(0, 50)), `head with chunks of ${size}`)
    t.ok(output.endsWith(text.slice(-50)), `tail with chunks of ${size}`)
  }
})

t.test('a multi-byte character cut at the boundary becomes U+FFFD, not an exception', async (t) => {
  const buffer = feed(4, ['aé', '日本語'])
  t.doesNotThrow(() => JSON.stringify(buffer.toString()))
  t.match(buffer.toString(), /\uFFFD/)
})

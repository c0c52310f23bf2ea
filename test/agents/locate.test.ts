import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { versionOf } from '#src/agents/locate.js'
import { isAlive, readPidFile, tempDir, until } from '../helpers/index.js'

const owner = (signal = new AbortController().signal) =>
  ({ signal, bind: (command: { file: string; args: string[] }) => command })

/** A CLI that, asked its version, starts a second process (as gemini relaunches itself) and never answers. */
function relaunching(dir: string): { bin: string; pids: string[] } {
  const bin = join(dir, 'relaunches')
  const pids = [join(dir, 'parent.pid'), join(dir, 'child.pid')]
  writeFileSync(
    bin, `#!/bin/sh\necho $$ > '${pids[0]}'\nsh -c 'echo $$ > "${pids[1]}"; exec sleep 120' &\nexec sleep 120\n`,
    { mode: 0o755 }
  )
  return { bin, pids }
}

t.test('a version probe that does not answer in time is ended with everything it started', async (t) => {
  const { bin, pids } = relaunching(tempDir(t))
  const answer = versionOf(bin, { PATH: process.env['PATH'] }, owner(), 500)
  const started = await Promise.all(pids.map((file) => readPidFile(file)))
  t.teardown(() => { for (const pid of started) { try { process.kill(pid, 'SIGKILL') } catch {} } })
  t.equal(await answer, null, 'no version')
  for (const pid of started) t.equal(await until(() => isAlive(pid), (alive) => !alive, 5000, `${pid} to end`), false)
})

t.test('and when its owner closes, the same', async (t) => {
  const { bin, pids } = relaunching(tempDir(t))
  const closing = new AbortController()
  const answer = versionOf(bin, { PATH: process.env['PATH'] }, owner(closing.signal))
  const started = await Promise.all(pids.map((file) => readPidFile(file)))
  t.teardown(() => { for (const pid of started) { try { process.kill(pid, 'SIGKILL') } catch {} } })
  closing.abort()
  t.equal(await answer, null)
  for (const pid of started) t.equal(await until(() => isAlive(pid), (alive) => !alive, 5000, `${pid} to end`), false)
})

t.test('a version: its first line; a binary that cannot start, or fails, or prints nothing: null', async (t) => {
  const dir = tempDir(t)
  const bin = (name: string, script: string): string => {
    writeFileSync(join(dir, name), `#!/bin/sh\n${script}\n`, { mode: 0o755 })
    return join(dir, name)
  }
  const env = { PATH: process.env['PATH'] }
  t.equal(await versionOf(bin('ok', 'echo "1.2.3 (x)"; echo more'), env, owner()), '1.2.3 (x)')
  t.equal(await versionOf(bin('fails', 'echo 1.0; exit 3'), env, owner()), null)
  t.equal(await versionOf(bin('quiet', 'exit 0'), env, owner()), null)
  t.equal(await versionOf(join(dir, 'missing'), env, owner()), null)
  writeFileSync(join(dir, 'not-executable'), 'x', { mode: 0o644 })
  t.equal(await versionOf(join(dir, 'not-executable'), env, owner()), null)
})

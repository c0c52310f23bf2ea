import t from 'tap'
import { spawn } from 'node:child_process'
import { killMarked, markIn, RUN_MARK_VARIABLE } from '#src/process/run-marks.js'
import { procFilesMatching } from '#src/process/proc-pids.js'
import { isAlive, waitFor } from '../helpers/index.js'

// The mark scan (issue 37, item 7): what finds a run's processes that left its group, read from every process's
// environment in batches (proc-pids.ts) rather than one async read per process.

const environ = (...entries: string[]): Buffer => Buffer.from(entries.map((entry) => `${entry}\0`).join(''))

t.test('the mark is read from an environ block wherever its entry is, and only from its own entry', async (t) => {
  t.equal(markIn(environ(`${RUN_MARK_VARIABLE}=a.b.c`, 'HOME=/root')), 'a.b.c', 'first')
  t.equal(markIn(environ('HOME=/root', `${RUN_MARK_VARIABLE}=a.b.c`, 'PATH=/bin')), 'a.b.c', 'between')
  t.equal(markIn(Buffer.from(`HOME=/root\0${RUN_MARK_VARIABLE}=a.b.c`)), 'a.b.c', 'last, no NUL after it')
  t.equal(markIn(environ(`X${RUN_MARK_VARIABLE}=a.b.c`)), undefined, 'a name ending with the mark’s is not it')
  t.equal(markIn(environ(`NOTE=${RUN_MARK_VARIABLE}=a.b.c`)), undefined, 'nor a value holding it')
  t.equal(markIn(environ('HOME=/root')), undefined)
  t.equal(markIn(Buffer.alloc(0)), undefined, 'a zombie’s empty environment')
})

t.test('every marked process is found, however many processes the host has: the scan reads them all, batch ' +
  'after batch', async (t) => {
  const mark = `test.${String(process.pid)}.${String(Date.now())}`
  const spawnSleep = (env: NodeJS.ProcessEnv) => spawn('sleep', ['1000'], { env, stdio: 'ignore' })
  // More marked processes than one batch: a scan that stopped after its first batch misses some, wherever their pids.
  const marked = Array.from({ length: 150 }, () => spawnSleep({ ...process.env, [RUN_MARK_VARIABLE]: mark }))
  const other = spawnSleep({ ...process.env, [RUN_MARK_VARIABLE]: `${mark}.other` })
  t.teardown(() => {
    for (const child of [...marked, other]) child.kill('SIGKILL')
  })
  await waitFor(() => marked.every((child) => child.pid !== undefined && isAlive(child.pid)), 5000, 'the sleeps')
  const found = await procFilesMatching('environ', (environ) => markIn(environ) === mark)
  t.same(found.sort(), marked.map((child) => child.pid!).sort(), 'one scan finds each one')
  t.equal(await killMarked((found) => found === mark), marked.length, 'each one killed')
  await waitFor(() => marked.every((child) => !isAlive(child.pid!)), 5000, 'the marked sleeps to end')
  t.ok(isAlive(other.pid!), 'a process of another mark is left alone')
})

import t, { type Test } from 'tap'
import { runAgent } from '../../src/process/agent-process.js'
import { processGroup } from '../../src/process/process-group.js'
import { scenario, standInEnv } from '../helpers/index.js'

const FLOOD_BYTES = 16 * 1024 * 1024
const PIPE_READ = 64 * 1024

/**
 * The most output the agent's pipes delivered within one turn of the event loop while it flooded: turns are counted
 * by a setImmediate chain (the check phase comes once per turn; pipe reads happen in the poll phase).
 */
async function mostBytesInOneTurn(t: Test, bytesBetweenTurns: number | undefined): Promise<number> {
  let turn = 0
  let running = true
  const tick = (): void => {
    turn++
    if (running) setImmediate(tick)
  }
  setImmediate(tick)
  const perTurn = new Map<number, number>()
  const outcome = await runAgent({
    command: { file: 'crush', args: ['run', '--', scenario.flood(FLOOD_BYTES)], cwd: undefined },
    containment: processGroup,
    env: standInEnv(),
    timeoutMs: 60_000,
    killGraceMs: 1000,
    outputLimitBytes: 1024 * 1024,
    ...(bytesBetweenTurns === undefined ? {} : { bytesBetweenTurns }),
    onOutput: (chunk) => perTurn.set(turn, (perTurn.get(turn) ?? 0) + chunk.length)
  })
  running = false
  t.ok(outcome.output.totalBytes >= FLOOD_BYTES, 'every byte came through')
  return Math.max(...perTurn.values())
}

t.test('a live relay reads its share, then lets the event loop turn before reading on', async (t) => {
  const budget = 128 * 1024
  // Paused once its share is read, a pipe delivers at most the read in progress on top of it.
  t.ok((await mostBytesInOneTurn(t, budget)) <= budget + PIPE_READ, 'never more than the share and one read in a turn')
  // Without a share, libuv reads a pipe up to 32 times in a row: the measure above would see it.
  t.ok((await mostBytesInOneTurn(t, undefined)) > budget + PIPE_READ, 'the measure sees a relay that does not yield')
})

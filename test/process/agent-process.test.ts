import t, { type Test } from 'tap'
import { runAgent } from '#src/process/agent-process.js'
import { LoopShare } from '#src/process/loop-share.js'
import { processGroup } from '#src/process/process-group.js'
import { scenario, standInEnv } from '../helpers/index.js'
import { settledValue, waitFor } from '../helpers/processes.js'

const FLOOD_BYTES = 16 * 1024 * 1024
/**
 * The most one relay's turn can deliver: a pipe read (64 KiB), and what reached the paused stream's buffer before it
 * stopped reading (its high-water mark, at most 64 KiB, crossed by one more read), which flows out in one piece.
 */
const ONE_TURN = 3 * 64 * 1024

/** Counts the loop's turns: the check phase, where setImmediate callbacks run, comes once a turn. */
function turnCounter(): { now: () => number; stop: () => void } {
  let turn = 0
  let running = true
  const tick = (): void => {
    turn++
    if (running) setImmediate(tick)
  }
  setImmediate(tick)
  return { now: () => turn, stop: () => (running = false) }
}

/**
 * Floods through `relays` agents at once, each with its turns setting, and returns the most output all of them
 * together delivered within one turn of the event loop (pipe reads happen in the poll phase).
 */
async function mostBytesInOneTurn(t: Test, turnsOfEach: Array<LoopShare | undefined>): Promise<number> {
  const turns = turnCounter()
  const perTurn = new Map<number, number>()
  const outcomes = await Promise.all(turnsOfEach.map((relayTurns, index) => runAgent({
    command: { file: 'crush', args: ['run', '--', scenario.flood(FLOOD_BYTES)], cwd: undefined },
    containment: { by: processGroup(), runId: `flood-${String(index)}` },
    env: standInEnv(),
    deadline: { timeoutMs: 60_000, killGraceMs: 1000 },
    output: { limitBytes: 1024 * 1024, turns: relayTurns },
    observer: { output: (chunk) => perTurn.set(turns.now(), (perTurn.get(turns.now()) ?? 0) + chunk.length) }
  })))
  turns.stop()
  t.ok(outcomes.every((outcome) => outcome.output.totalBytes >= FLOOD_BYTES), 'every byte of every agent came through')
  return Math.max(...perTurn.values())
}

/**
 * The control of the tests below: relays with no share must show more than `floor` bytes in one turn. That needs the
 * writers to refill their pipes while the relay drains them, which a busy machine may not schedule in a given flood:
 * tried up to three times, the most kept.
 */
async function mostWithoutShare(t: Test, relays: number, floor: number): Promise<number> {
  let most = 0
  for (let attempt = 0; attempt < 3 && most <= floor; attempt++) {
    most = Math.max(most, await mostBytesInOneTurn(t, Array.from({ length: relays }, () => undefined)))
  }
  return most
}

t.test('a relay reads once a turn of the event loop, when its share gives it one', async (t) => {
  t.ok(
    (await mostBytesInOneTurn(t, [new LoopShare(1)])) <= ONE_TURN,
    'never more than one read (and what it buffered) a turn'
  )
  // Without a share, libuv reads a pipe up to 32 times in a row: the measure above would see it.
  t.ok((await mostWithoutShare(t, 1, ONE_TURN)) > ONE_TURN, 'the measure sees a relay that does not yield')
})

t.test('relays sharing the loop take turns: each turn lets only so many of them read', async (t) => {
  // The share's turns and the counter's are both setImmediate callbacks: one counted turn can straddle two grants.
  const onePerTurn = new LoopShare(1)
  const one = await mostBytesInOneTurn(t, [onePerTurn, onePerTurn, onePerTurn, onePerTurn])
  t.ok(one <= 2 * ONE_TURN, `four floods, one relay’s read a turn (${one} bytes at most)`)
  const twoPerTurn = new LoopShare(2)
  const two = await mostBytesInOneTurn(t, [twoPerTurn, twoPerTurn, twoPerTurn, twoPerTurn])
  t.ok(two <= 4 * ONE_TURN, `four floods, two relays’ reads a turn (${two} bytes at most)`)
  const none = await mostWithoutShare(t, 4, 4 * ONE_TURN)
  t.ok(none > 4 * ONE_TURN, `the measure sees relays that do not take turns (${none} bytes in one turn)`)
})

t.test('a stdout sink behind pauses the pipes until it has caught up, through a stop too: what waits for it stays ' +
  'bounded', async (t) => {
  let delivered = 0
  let heldAt: number | undefined
  let resume: (() => void) | undefined
  let caughtUp = false
  const stop = new AbortController()
  // An agent that floods and does not heed SIGINT: it goes on writing until SIGTERM, a grace later.
  const run = runAgent({
    command: { file: 'sh', args: ['-c', 'trap "" INT; exec yes'], cwd: undefined },
    containment: { by: processGroup(), runId: 'stdout-sink' },
    env: standInEnv(),
    deadline: { timeoutMs: 60_000, killGraceMs: 3000 },
    signal: stop.signal,
    output: {
      limitBytes: 1024 * 1024,
      stdoutSink: {
        write: (chunk) => {
          delivered += chunk.length
          if (heldAt === undefined && delivered >= 1024 * 1024) heldAt = delivered
          return heldAt === undefined || caughtUp
        },
        onDrain: (resumeRead) => { resume ??= resumeRead }
      }
    }
  })
  await waitFor(() => heldAt !== undefined, 10_000, 'the sink to fall behind')
  const whileBehind = await settledValue(() => delivered, 300)
  t.ok(whileBehind - heldAt! <= ONE_TURN, `${whileBehind - heldAt!} bytes came after it fell behind`)
  stop.abort('cancelled')
  const whileStopping = await settledValue(() => delivered, 300)
  t.equal(whileStopping, whileBehind, 'a stop does not lift the hold: not a byte more')
  caughtUp = true
  resume!()
  const outcome = await run
  t.equal(outcome.stopReason, 'cancelled')
})

t.test('a containment whose signals reach nothing (a taskkill or wsl.exe that failed): the agent itself is ended ' +
  'after the last grace, and the run says processes may remain', async (t) => {
  const group = processGroup()
  // Every signal the containment is asked to send is lost, as when the tool it calls fails.
  const deaf: typeof group = {
    ...group,
    control: (child, launch) => ({ ...group.control(child, launch), signal: async () => undefined })
  }
  const end = await runAgent({
    command: { file: 'crush', args: ['run', '--', scenario.sleep(60_000)], cwd: undefined },
    containment: { by: deaf, runId: 'deaf-containment' },
    env: standInEnv(),
    deadline: { timeoutMs: 100, killGraceMs: 50 },
    output: { limitBytes: 1024 }
  })
  t.match(end, { stopReason: 'timeout', signal: 'SIGKILL', containmentFailed: true })
})

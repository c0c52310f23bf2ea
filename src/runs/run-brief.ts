import type { RunParams } from '../schemas/run.js'

/** How much of a task a listing shows: enough to tell runs apart, not a copy of a task of 30,000 characters. */
export const TASK_EXCERPT_CHARS = 200

/** What a listing tells of a run besides its state: its task's beginning, and when its timeout stops it. */
export interface RunBrief {
  task: string
  deadline: string
}

/** The first characters of a task, cut between code points (an emoji is never split), with … when cut. */
export function taskExcerpt(task: string): string {
  const points = Array.from(task)
  return points.length <= TASK_EXCERPT_CHARS ? task : `${points.slice(0, TASK_EXCERPT_CHARS).join('')}…`
}

/** Taken when the agent starts: its timeout runs from then. */
export const runBrief = (params: Pick<RunParams, 'task' | 'timeout'>, startedAt = Date.now()): RunBrief => ({
  task: taskExcerpt(params.task),
  deadline: new Date(startedAt + params.timeout * 1000).toISOString()
})

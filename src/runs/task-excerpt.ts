/** How much of a task a listing shows: enough to tell runs apart, not a copy of a task of 30,000 characters. */
export const TASK_EXCERPT_CHARS = 200

/** The first characters of a task, cut between code points (an emoji is never split), with … when cut. */
export function taskExcerpt(task: string): string {
  const points = Array.from(task)
  return points.length <= TASK_EXCERPT_CHARS ? task : `${points.slice(0, TASK_EXCERPT_CHARS).join('')}…`
}

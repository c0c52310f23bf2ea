import { readdir } from 'node:fs/promises'

/** Every process /proc lists now, by pid; none where there is no /proc (macOS). */
export async function procPids(): Promise<number[]> {
  let entries: string[]
  try {
    entries = await readdir('/proc')
  } catch {
    return []
  }
  return entries.filter((entry) => /^\d+$/.test(entry)).map(Number)
}

import { closeSync, readdirSync, readFileSync } from 'node:fs'

/** The close-on-exec bit of a descriptor's flags, as /proc/<pid>/fdinfo shows them (octal). */
const O_CLOEXEC = 0o2000000

/**
 * Closes the descriptors beyond stdio that the service was started with and would hand on to every agent it spawns
 * (Node opens its own close-on-exec; one a shell or a supervisor left open, say `3>secrets.log`, is not). Node's IPC
 * channel, when it has one, is kept. Linux only: elsewhere there is no /proc to tell them apart. Returns the closed
 * descriptors, for the startup log.
 */
export function closeInheritedDescriptors(): number[] {
  if (process.platform !== 'linux') return []
  const channel = Number(process.env['NODE_CHANNEL_FD'] ?? -1)
  const closed: number[] = []
  let entries: string[]
  try {
    entries = readdirSync('/proc/self/fd')
  } catch {
    return []
  }
  for (const entry of entries) {
    const fd = Number(entry)
    if (fd <= 2 || fd === channel) continue
    let flags: number
    try {
      flags = parseInt(/^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${entry}`, 'utf8'))?.[1] ?? '', 8)
    } catch {
      // the descriptor readdir itself used, closed since
      continue
    }
    if (Number.isNaN(flags) || (flags & O_CLOEXEC) !== 0) continue
    try {
      closeSync(fd)
      closed.push(fd)
    } catch {
      // closed meanwhile
    }
  }
  return closed
}

import { Writable } from 'node:stream'

// git's `-z` outputs, read as they come: a path may hold any byte but NUL (a newline, a tab, a quote), so fields are
// split on NUL only and never unquoted.

export type FileStatus = 'added' | 'modified' | 'deleted' | 'renamed'

export interface RawChange {
  status: FileStatus
  path: string
  oldPath?: string
}

export interface LineCounts {
  path: string
  oldPath?: string
  additions: number
  deletions: number
  binary: boolean
}

/** A copy (only with -C) is a new file; a type change (file ↔ symlink) a modification. */
const STATUSES: Readonly<Record<string, FileStatus>> = { A: 'added', C: 'added', D: 'deleted', R: 'renamed' }

/** `--raw -z`: `:<modes> <shas> <status>` then its path, or, for a rename or copy, its old path and its new one. */
export function parseRaw(fields: readonly string[]): RawChange[] {
  const changes: RawChange[] = []
  for (let i = 0; i < fields.length; i++) {
    const header = fields[i]!
    if (!header.startsWith(':')) throw new Error(`not a raw diff record: ${JSON.stringify(header)}`)
    const letter = header.slice(header.lastIndexOf(' ') + 1, header.lastIndexOf(' ') + 2)
    const status = STATUSES[letter] ?? 'modified'
    if (letter === 'R' || letter === 'C') {
      const oldPath = fields[++i]
      const path = fields[++i]
      if (oldPath === undefined || path === undefined) throw new Error('a raw diff record cut short')
      changes.push(letter === 'R' ? { status, path, oldPath } : { status, path })
    } else {
      const path = fields[++i]
      if (path === undefined) throw new Error('a raw diff record cut short')
      changes.push({ status, path })
    }
  }
  return changes
}

/** `--numstat -z`: `<added>\t<deleted>\t<path>`, or `…\t` then the old and new paths; `-` counts for binary files. */
export function parseNumstat(fields: readonly string[]): LineCounts[] {
  const counts: LineCounts[] = []
  for (let i = 0; i < fields.length; i++) {
    const match = /^(\d+|-)\t(\d+|-)\t(.*)$/s.exec(fields[i]!)
    if (match === null) throw new Error(`not a numstat record: ${JSON.stringify(fields[i])}`)
    const [, added, deleted, inline] = match as unknown as [string, string, string, string]
    const binary = added === '-'
    const lines = { additions: binary ? 0 : Number(added), deletions: binary ? 0 : Number(deleted), binary }
    if (inline !== '') {
      counts.push({ path: inline, ...lines })
      continue
    }
    const oldPath = fields[++i]
    const path = fields[++i]
    if (oldPath === undefined || path === undefined) throw new Error('a numstat record cut short')
    counts.push({ path, oldPath, ...lines })
  }
  return counts
}

/** The fields of a `-z` stream, split as chunks arrive; more than `maxBytes` in all fails the stream. */
export class ZFields extends Writable {
  readonly fields: string[] = []
  private pending: Buffer[] = []
  private bytes = 0

  constructor(private readonly maxBytes: number) {
    super()
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.bytes += chunk.length
    if (this.bytes > this.maxBytes) {
      callback(new Error(`more than ${this.maxBytes} bytes of file list`))
      return
    }
    let start = 0
    for (let end = chunk.indexOf(0); end !== -1; end = chunk.indexOf(0, start)) {
      this.pending.push(chunk.subarray(start, end))
      this.fields.push(Buffer.concat(this.pending).toString('utf8'))
      this.pending = []
      start = end + 1
    }
    if (start < chunk.length) this.pending.push(Buffer.from(chunk.subarray(start)))
    callback()
  }

  override _final(callback: (error?: Error | null) => void): void {
    callback(this.pending.length === 0 ? null : new Error('a -z output that does not end with NUL'))
  }
}

import { spawn } from 'node:child_process'
import {
  chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync
} from 'node:fs'
import { join } from 'node:path'
import { pathAsUser, type AgentUser } from './agent-user.js'
import { prepareWorkdir } from './workdir.js'

/** AGENT_USERS: the uids the service gives tokens, one each. */
export interface UidRange {
  first: number
  last: number
}

/** Who one token's agents are: a user of its own, in a home of its own, working by default in its workspace. */
export interface TokenIdentity {
  user: AgentUser
  workdir: string
}

/** What the service keeps of each token's user, in DATA_DIR: its uid for good, and the template its home holds. */
interface TokenRecord {
  uid: number
  template: string | null
}

const RECORD_FILE = 'agent-users.json'

/** `61000-61999`: a range of uids no account of the system uses, root's never. */
export function parseUidRange(text: string): UidRange {
  const match = /^(\d+)-(\d+)$/.exec(text.trim())
  const first = Number(match?.[1])
  const last = Number(match?.[2])
  if (match === null || first < 1 || last < first || last > 4_294_967_294) {
    throw new Error(`AGENT_USERS=${text}: a range of uids, first-last (e.g. 61000-61999), root's excluded`)
  }
  return { first, last }
}

/**
 * The uid a token keeps: the one it was given before, else the lowest free one. Pure: the records are the service's
 * memory of every token it ever served, so a token named later never takes a uid (and the files it owns) of another.
 */
export function allocateUid(records: Record<string, TokenRecord>, token: string, range: UidRange): number {
  const kept = records[token]
  if (kept !== undefined) return kept.uid
  const taken = new Set(Object.values(records).map((record) => record.uid))
  for (let uid = range.first; uid <= range.last; uid++) if (!taken.has(uid)) return uid
  throw new Error(
    `AGENT_USERS ${String(range.first)}-${String(range.last)} has no uid left for token ${token}: widen the range`
  )
}

/**
 * What the template holds, as a fingerprint that changes when any file of it does (name, size, mode, time): a home
 * laid from an older one is laid again.
 */
function templateFingerprint(dir: string): string {
  const entries: string[] = []
  const walk = (relative: string): void => {
    for (const entry of readdirSync(join(dir, relative), { withFileTypes: true })) {
      const path = join(relative, entry.name)
      const stat = statSync(join(dir, path), { throwIfNoEntry: false })
      entries.push(`${path}\0${String(stat?.size)}\0${String(stat?.mode)}\0${String(stat?.mtimeMs)}`)
      if (entry.isDirectory()) walk(path)
    }
  }
  walk('')
  return entries.sort().join('\n')
}

/** Runs `file` to its end; rejects with what it printed on stderr. */
function finished(child: ReturnType<typeof spawn>, what: string): Promise<void> {
  let errors = ''
  child.stderr?.on('data', (chunk: Buffer) => { errors += chunk.toString() })
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code) => {
      if (code === 0) resolve()
      else reject(new Error(`${what} failed (exit ${String(code)}): ${errors.trim()}`))
    })
  })
}

/**
 * Each token's agents as a Unix user of their own (AGENT_USERS): a uid allocated once per token name and recorded,
 * with no passwd entry needed, and a home of its own (0700, under DATA_DIR/homes), so that two tokens' agents are as
 * separate as two users of one machine: neither reads, signals, traces or writes the other's processes and files
 * (their conversations, their CLIs' settings and hooks). The operator's logged-in CLIs (AGENT_HOME_TEMPLATE) are laid
 * into each home at first use and again when the template changes, by the token's own user (tar unpacking what the
 * service packs), so that nothing of a home an agent controls is ever written by root.
 */
export class TokenUsers {
  readonly #range: UidRange
  readonly #homes: string
  readonly #recordFile: string
  readonly #template: string | undefined
  readonly #records: Record<string, TokenRecord>
  /** One preparation at a time per token: two first runs lay the template once. */
  readonly #pending = new Map<string, Promise<TokenIdentity>>()
  /** Tokens whose user was seen reaching its home, once per life of the service. */
  readonly #reached = new Set<string>()

  constructor(options: { range: UidRange; dataDir: string; template: string | undefined }) {
    this.#range = options.range
    this.#homes = join(options.dataDir, 'homes')
    this.#recordFile = join(options.dataDir, RECORD_FILE)
    this.#template = options.template
    this.#records = existsSync(this.#recordFile)
      ? JSON.parse(readFileSync(this.#recordFile, 'utf8')) as Record<string, TokenRecord>
      : {}
    // Crossed by every token's user to reach its own home, listed by none.
    mkdirSync(this.#homes, { recursive: true, mode: 0o711 })
    chmodSync(this.#homes, 0o711)
  }

  /** The uids of these tokens, allocated now (at start): a range too small stops the service before it listens. */
  allocate(tokens: string[]): void {
    for (const token of tokens) this.#record(token, { uid: allocateUid(this.#records, token, this.#range) })
  }

  /** The token's user and home, ready for an agent: made at its first run, its template laid when it changed. */
  async identityOf(token: string): Promise<TokenIdentity> {
    const earlier = this.#pending.get(token) ?? Promise.resolve(undefined)
    const next = earlier.catch(() => undefined).then(() => this.#prepare(token))
    this.#pending.set(token, next)
    try {
      return await next
    } finally {
      if (this.#pending.get(token) === next) this.#pending.delete(token)
    }
  }

  async #prepare(token: string): Promise<TokenIdentity> {
    const uid = allocateUid(this.#records, token, this.#range)
    this.#record(token, { uid })
    const home = join(this.#homes, String(uid))
    const user: AgentUser = { name: token, uid, gid: uid, groups: [uid], home, listed: false }
    if (!existsSync(home)) {
      // Root makes it where no agent can reach yet (the homes directory is root's), then gives it away.
      mkdirSync(home, { mode: 0o700 })
      chownSync(home, uid, uid)
    }
    chmodSync(home, 0o700)
    if (!this.#reached.has(token)) {
      if (await pathAsUser(home, user) !== 'directory') {
        throw new Error(
          `${home} cannot be reached by uid ${String(uid)}: every directory above DATA_DIR/homes must be one others ` +
            'may cross (o+x)'
        )
      }
      this.#reached.add(token)
    }
    const template = this.#template === undefined ? null : templateFingerprint(this.#template)
    if (template !== null && this.#records[token]?.template !== template) {
      await this.#lay(user)
      this.#record(token, { template })
    }
    const workdir = join(home, 'workspace')
    prepareWorkdir(workdir, user)
    return { user, workdir }
  }

  /** The template packed by the service, unpacked into the home by the token's user: its files, its modes. */
  async #lay(user: AgentUser): Promise<void> {
    const pack = spawn('tar', ['-C', this.#template!, '-cf', '-', '.'], { stdio: ['ignore', 'pipe', 'pipe'] })
    const identity = ['--reuid', String(user.uid), '--regid', String(user.gid), '--clear-groups']
    const unpack = spawn('setpriv', [...identity, '--', 'tar', '-C', user.home, '-xpf', '-'], {
      stdio: ['pipe', 'ignore', 'pipe']
    })
    pack.stdout.pipe(unpack.stdin)
    await Promise.all([finished(pack, 'packing AGENT_HOME_TEMPLATE'), finished(unpack, `laying it into ${user.home}`)])
    // The template's own top directory's mode came with it: the home stays its owner's alone.
    chmodSync(user.home, 0o700)
  }

  #record(token: string, change: Partial<TokenRecord>): void {
    const before = this.#records[token]
    const after: TokenRecord = { uid: change.uid ?? before!.uid, template: change.template ?? before?.template ?? null }
    if (before?.uid === after.uid && before.template === after.template) return
    this.#records[token] = after
    const temporary = `${this.#recordFile}.${String(process.pid)}`
    writeFileSync(temporary, JSON.stringify(this.#records, null, 2), { mode: 0o600 })
    renameSync(temporary, this.#recordFile)
  }
}

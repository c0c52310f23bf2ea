import type BetterSqlite3 from 'better-sqlite3'
import { closeSync, mkdirSync, openSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { resultFromStore } from '../../schemas/run.js'
import type { ListedWebhook } from '../../schemas/webhooks.js'
import type { RunError } from '../../schemas/runs.js'
import type { RunWorkspace } from '../../schemas/workspace.js'
import type { RunLimits } from '../../schemas/limits.js'
import type { StoredEvent } from '../event-log.js'
import { LocalClaims } from './local-claims.js'
import {
  sessionKey, type RetentionOptions, type RunRecord, type RunStore, type SessionRecord, type SessionWorktree
} from './run-store.js'
import { SqliteOutbox } from './sqlite-outbox.js'
import { SqliteSpendLedger } from './spend-ledgers.js'

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    tool TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    result TEXT,
    replica TEXT NOT NULL,
    task TEXT,
    deadline TEXT,
    webhook TEXT,
    workspace TEXT,
    queue_position TEXT,
    error TEXT,
    model TEXT,
    limits TEXT,
    context TEXT,
    kind TEXT
  );
  CREATE INDEX IF NOT EXISTS runs_by_owner ON runs (owner, created_at);
  CREATE TABLE IF NOT EXISTS events (
    run TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id INTEGER NOT NULL,
    start_byte INTEGER NOT NULL,
    end_byte INTEGER NOT NULL,
    frame BLOB NOT NULL,
    PRIMARY KEY (run, id)
  ) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS sessions (
    tool TEXT NOT NULL,
    id TEXT NOT NULL,
    owner TEXT NOT NULL,
    cwd TEXT,
    wsl_distro TEXT,
    wsl_user TEXT,
    updated_at TEXT NOT NULL,
    worktree TEXT,
    PRIMARY KEY (tool, id)
  ) WITHOUT ROWID;
  -- Every saved session prunes the stale ones: by age, without reading the whole table.
  CREATE INDEX IF NOT EXISTS sessions_by_age ON sessions (updated_at);
  -- and its owner's beyond SESSIONS_MAX_PER_OWNER, least recent first.
  CREATE INDEX IF NOT EXISTS sessions_by_owner ON sessions (owner, updated_at);
`

/** Columns added since the first schema: a file an older version made gets them, empty for its runs. */
const ADDED_COLUMNS = {
  runs: ['task', 'deadline', 'webhook', 'workspace', 'queue_position', 'error', 'model', 'limits', 'context', 'kind'],
  sessions: ['worktree']
}

function addMissingColumns(db: BetterSqlite3.Database): void {
  for (const [table, columns] of Object.entries(ADDED_COLUMNS)) {
    const present = new Set((db.pragma(`table_info(${table})`) as Array<{ name: string }>).map((column) => column.name))
    for (const column of columns) {
      if (!present.has(column)) db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} TEXT`)
    }
  }
}

/** How a native module built for another Node, platform or architecture fails to load (dlopen, or bindings). */
const NATIVE_LOAD_FAILURE = new RegExp([
  'NODE_MODULE_VERSION', 'Could not locate the bindings file', 'invalid ELF header', 'wrong ELF class',
  'not a valid Win32 application', 'mach-o'
].join('|'), 'i')

function openDatabase(file: string): BetterSqlite3.Database {
  try {
    // Loaded only when chosen: the native module is no cost to a service that keeps runs elsewhere.
    const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3
    return new Database(file)
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException
    if (code !== 'ERR_DLOPEN_FAILED' && !NATIVE_LOAD_FAILURE.test(message)) throw error
    throw new Error(
      `better-sqlite3 cannot load in Node ${process.version} (${process.platform}-${process.arch}): ` +
      `${message.split('\n')[0]!}. Run \`npm rebuild better-sqlite3\` with this Node, or set RUNS_STORE=memory`,
      { cause: error }
    )
  }
}

interface RunRow {
  id: string
  owner: string
  tool: string
  status: RunRecord['status']
  created_at: string
  finished_at: string | null
  result: string | null
  replica: string
  task: string | null
  deadline: string | null
  /** Its webhook's URL and events, as JSON. */
  webhook: string | null
  /** Its worktree, as JSON. */
  workspace: string | null
  queue_position: string | null
  /** Why it ended before its agent, as JSON. */
  error: string | null
  model: string | null
  /** Its limits, as JSON. */
  limits: string | null
  context: string | null
  kind: 'sync' | 'stream' | null
}

const toRecord = (row: RunRow): RunRecord => ({
  id: row.id,
  caller: row.owner,
  tool: row.tool,
  status: row.status,
  createdAt: row.created_at,
  finishedAt: row.finished_at,
  result: row.result === null ? null : (resultFromStore(JSON.parse(row.result)) as RunRecord['result']),
  replica: row.replica,
  ...(row.task === null ? {} : { task: row.task }),
  ...(row.deadline === null ? {} : { deadline: row.deadline }),
  ...(row.webhook === null ? {} : { webhook: JSON.parse(row.webhook) as ListedWebhook }),
  ...(row.workspace === null ? {} : { workspace: JSON.parse(row.workspace) as RunWorkspace }),
  ...(row.queue_position === null ? {} : { queuePosition: Number(row.queue_position) }),
  ...(row.error === null ? {} : { error: JSON.parse(row.error) as RunError }),
  ...(row.model === null ? {} : { model: row.model }),
  ...(row.limits === null ? {} : { limits: JSON.parse(row.limits) as RunLimits }),
  ...(row.context === null ? {} : { context: row.context }),
  ...(row.kind === null ? {} : { kind: row.kind })
})

const toRow = (record: RunRecord): RunRow => ({
  id: record.id,
  owner: record.caller,
  tool: record.tool,
  status: record.status,
  created_at: record.createdAt,
  finished_at: record.finishedAt,
  result: record.result === null ? null : JSON.stringify(record.result),
  replica: record.replica,
  task: record.task ?? null,
  deadline: record.deadline ?? null,
  webhook: record.webhook === undefined ? null : JSON.stringify(record.webhook),
  workspace: record.workspace === undefined ? null : JSON.stringify(record.workspace),
  queue_position: record.queuePosition === undefined ? null : String(record.queuePosition),
  error: record.error === undefined ? null : JSON.stringify(record.error),
  model: record.model ?? null,
  limits: record.limits === undefined ? null : JSON.stringify(record.limits),
  context: record.context ?? null,
  kind: record.kind ?? null
})

/**
 * Runs in an SQLite file under DATA_DIR, so that a restart keeps finished runs, their results and their kept events.
 * One service per file: runs it finds still running at start were its own, ended by a crash. better-sqlite3 answers
 * synchronously, in microseconds for these statements, so no query waits on another.
 */
export class SqliteRunStore implements RunStore {
  readonly kind = 'sqlite'
  readonly outbox: SqliteOutbox
  readonly spend: SqliteSpendLedger
  readonly #db: BetterSqlite3.Database
  readonly #retention: RetentionOptions
  readonly #statements
  readonly #claims = new LocalClaims()

  /** `replica`: this life of the service, whose runs' webhook deliveries an earlier life's are not. */
  constructor(dataDir: string, retention: RetentionOptions, replica: string) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 })
    const file = join(dataDir, 'runs.sqlite')
    // Tasks and outputs are the callers' own: SQLite gives its -wal and -shm files the database file's mode.
    closeSync(openSync(file, 'a', 0o600))
    this.#db = openDatabase(file)
    this.#db.pragma('journal_mode = WAL')
    // WAL with NORMAL survives a crash of the service (not of the machine) without an fsync per write.
    this.#db.pragma('synchronous = NORMAL')
    this.#db.pragma('foreign_keys = ON')
    this.#db.exec(SCHEMA)
    addMissingColumns(this.#db)
    this.#retention = retention
    this.outbox = new SqliteOutbox(this.#db, { replica, retentionMs: retention.retentionMs })
    this.spend = new SqliteSpendLedger(this.#db)
    const db = this.#db
    this.#statements = {
      insertRun: db.prepare(
        'INSERT INTO runs (id, owner, tool, status, created_at, finished_at, result, replica, task, deadline, ' +
          'webhook, workspace, queue_position, error, model, limits, context, kind) VALUES (@id, @owner, @tool, ' +
          '@status, @created_at, @finished_at, @result, @replica, @task, @deadline, @webhook, @workspace, ' +
          '@queue_position, @error, @model, @limits, @context, @kind) ' +
          // A queued run is stored as it starts waiting, and again as its agent starts.
          'ON CONFLICT (id) DO UPDATE SET status = excluded.status, deadline = excluded.deadline, ' +
          'workspace = excluded.workspace, queue_position = excluded.queue_position, model = excluded.model, ' +
          'limits = excluded.limits'
      ),
      updateRun: db.prepare(
        'UPDATE runs SET status = @status, finished_at = @finished_at, result = @result, workspace = @workspace, ' +
          'queue_position = @queue_position, error = @error WHERE id = @id'
      ),
      getRun: db.prepare<[string, string]>(
        'SELECT * FROM runs WHERE id = ? AND (finished_at IS NULL OR finished_at >= ?)'
      ),
      listRuns: db.prepare<[string, string]>(
        'SELECT id, owner, tool, status, created_at, finished_at, NULL AS result, replica, task, deadline, webhook, ' +
          'workspace, queue_position, error, model, limits, context, kind ' +
          'FROM runs ' +
          'WHERE owner = ? AND (finished_at IS NULL OR finished_at >= ?) ORDER BY created_at DESC'
      ),
      running: db.prepare<[]>("SELECT id FROM runs WHERE status IN ('running', 'queued')"),
      markLost: db.prepare<[string]>(
        "UPDATE runs SET status = 'lost', finished_at = ?, queue_position = NULL WHERE status IN ('running', 'queued')"
      ),
      insertEvent: db.prepare<[string, number, number, number, Buffer]>(
        'INSERT OR REPLACE INTO events (run, id, start_byte, end_byte, frame) VALUES (?, ?, ?, ?, ?)'
      ),
      dropEvents: db.prepare<[string, number, number]>('DELETE FROM events WHERE run = ? AND id > ? AND id < ?'),
      events: db.prepare<[string, number, number]>(
        'SELECT id, start_byte, end_byte, frame FROM events WHERE run = ? AND id > ? ORDER BY id LIMIT ?'
      ),
      // An id already another caller's is left as it is: the statement changes no row. The column keeps 0.1.0's
      // name, `owner`.
      saveSession: db.prepare(
        'INSERT INTO sessions (tool, id, owner, cwd, wsl_distro, wsl_user, updated_at, worktree) ' +
          'VALUES (@tool, @id, @caller, @cwd, @wslDistro, @wslUser, @updatedAt, @worktree) ' +
          'ON CONFLICT (tool, id) DO UPDATE SET cwd = excluded.cwd, wsl_distro = excluded.wsl_distro, ' +
          'wsl_user = excluded.wsl_user, updated_at = excluded.updated_at, worktree = excluded.worktree ' +
          'WHERE sessions.owner = excluded.owner'
      ),
      pruneOwnersSessions: db.prepare<[string, string, number]>(
        'DELETE FROM sessions WHERE owner = ? AND (tool, id) IN (SELECT tool, id FROM sessions WHERE owner = ? ' +
          'ORDER BY updated_at DESC LIMIT -1 OFFSET ?)'
      ),
      session: db.prepare<[string, string, string]>(
        'SELECT tool, id, owner AS caller, cwd, wsl_distro AS wslDistro, wsl_user AS wslUser, ' +
          'updated_at AS updatedAt, worktree ' +
          'FROM sessions WHERE tool = ? AND id = ? AND updated_at >= ?'
      ),
      pruneSessions: db.prepare<[string]>('DELETE FROM sessions WHERE updated_at < ?'),
      pruneOld: db.prepare<[string]>('DELETE FROM runs WHERE finished_at IS NOT NULL AND finished_at < ?'),
      pruneMany: db.prepare<[number]>(
        'DELETE FROM runs WHERE finished_at IS NOT NULL AND id NOT IN ' +
          '(SELECT id FROM runs WHERE finished_at IS NOT NULL ORDER BY finished_at DESC LIMIT ?)'
      )
    }
  }

  async saveSession(session: SessionRecord): Promise<boolean> {
    const { pruneSessions, saveSession, pruneOwnersSessions } = this.#statements
    pruneSessions.run(this.#sessionsCutoff())
    const row = { ...session, worktree: session.worktree === undefined ? null : JSON.stringify(session.worktree) }
    if (saveSession.run(row).changes === 0) return false
    pruneOwnersSessions.run(session.caller, session.caller, this.#retention.sessionsMaxPerOwner)
    return true
  }

  async session(tool: string, id: string): Promise<SessionRecord | undefined> {
    const row = this.#statements.session.get(tool, id, this.#sessionsCutoff()) as
      (Omit<SessionRecord, 'worktree'> & { worktree: string | null }) | undefined
    if (row === undefined) return undefined
    const { worktree, ...session } = row
    return worktree === null ? session : { ...session, worktree: JSON.parse(worktree) as SessionWorktree }
  }

  async claimSession(tool: string, id: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.#claims.claim(sessionKey(tool, id), holder, ttlMs)
  }

  async releaseSession(tool: string, id: string, holder: string): Promise<void> {
    this.#claims.release(sessionKey(tool, id), holder)
  }

  async recover(): Promise<string[]> {
    const ids = (this.#statements.running.all() as { id: string }[]).map((row) => row.id)
    this.#statements.markLost.run(new Date().toISOString())
    this.#prune()
    return ids
  }

  async create(record: RunRecord): Promise<void> {
    this.#statements.insertRun.run(toRow(record))
  }

  async saveEvents(
    id: string,
    events: StoredEvent[],
    dropped: { after: number; before: number } | undefined
  ): Promise<void> {
    const { insertEvent, dropEvents } = this.#statements
    this.#db.transaction(() => {
      if (dropped !== undefined) dropEvents.run(id, dropped.after, dropped.before)
      for (const event of events) insertEvent.run(id, event.id, event.offset, event.end, event.frame)
    })()
  }

  async finish(record: RunRecord): Promise<void> {
    this.#statements.updateRun.run(toRow(record))
    this.#prune()
  }

  async get(id: string): Promise<RunRecord | undefined> {
    const row = this.#statements.getRun.get(id, this.#cutoff()) as RunRow | undefined
    return row === undefined ? undefined : toRecord(row)
  }

  async list(caller: string): Promise<Array<Omit<RunRecord, 'result'>>> {
    return (this.#statements.listRuns.all(caller, this.#cutoff()) as RunRow[]).map((row) => {
      const { result: _result, ...listing } = toRecord(row)
      return listing
    })
  }

  async events(id: string, lastId: number, max: number): Promise<StoredEvent[]> {
    const rows = this.#statements.events.all(id, lastId, max) as Array<{
      id: number
      start_byte: number
      end_byte: number
      frame: Buffer
    }>
    return rows.map((row) => ({ id: row.id, offset: row.start_byte, end: row.end_byte, frame: row.frame }))
  }

  async requestCancel(): Promise<void> {}

  onCancelRequest(): void {}

  async close(): Promise<void> {
    this.#db.close()
  }

  #sessionsCutoff(): string {
    return new Date(Date.now() - this.#retention.sessionsRetentionMs).toISOString()
  }

  #cutoff(): string {
    return new Date(Date.now() - this.#retention.retentionMs).toISOString()
  }

  #prune(): void {
    this.#statements.pruneOld.run(this.#cutoff())
    this.#statements.pruneMany.run(this.#retention.maxFinished)
  }
}

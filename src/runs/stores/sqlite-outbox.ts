import type BetterSqlite3 from 'better-sqlite3'
import type { AfterAttempt, DeliveryAttempt, PushForm, WebhookDelivery, WebhookOutbox } from '../../webhooks/outbox.js'
import { LocalClaims } from './local-claims.js'

/**
 * Times are ISO strings as toISOString() writes them, compared as text like the runs' (their order is the times'
 * order). `ended_at`, the last attempt's time once nothing more is tried, is what pruning reads.
 */
const SCHEMA = `
  CREATE TABLE IF NOT EXISTS webhook_deliveries (
    id TEXT PRIMARY KEY,
    run TEXT NOT NULL,
    caller TEXT NOT NULL,
    type TEXT NOT NULL,
    url TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL,
    replica TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts TEXT NOT NULL,
    next_attempt_at TEXT,
    ended_at TEXT,
    push TEXT
  );
  -- Every poll reads what is due (and the armed ones, for orphans) without reading the delivered.
  CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at, created_at);
  CREATE INDEX IF NOT EXISTS webhook_deliveries_by_run ON webhook_deliveries (run, created_at);
  CREATE INDEX IF NOT EXISTS webhook_deliveries_ended ON webhook_deliveries (ended_at) WHERE ended_at IS NOT NULL;
`

/** A row as the statements read it: every column named as the delivery's field, its attempts and push form JSON. */
type DeliveryRow = Omit<WebhookDelivery, 'attempts' | 'push'> & { attempts: string; push: string | null }

const toDelivery = ({ push, ...row }: DeliveryRow): WebhookDelivery => ({
  ...row,
  attempts: JSON.parse(row.attempts) as DeliveryAttempt[],
  ...(push === null ? {} : { push: JSON.parse(push) as PushForm })
})

const COLUMNS = 'id, run, caller, type, url, body, created_at AS createdAt, replica, state, attempts, ' +
  'next_attempt_at AS nextAttemptAt, push'

export interface SqliteOutboxOptions {
  /** This life of the service: an armed delivery of any other waits for a run that died with it. */
  replica: string
  /** How long an ended delivery is kept after its last attempt, as finished runs are. */
  retentionMs: number
}

/**
 * Deliveries in the run store's SQLite file, so that a restart or a crash loses none: the next life delivers what is
 * pending, and fires as lost what an earlier life left armed. One service per file (its DATA_DIR), so claims are held
 * in its memory.
 */
export class SqliteOutbox implements WebhookOutbox {
  readonly #options: SqliteOutboxOptions
  readonly #db: BetterSqlite3.Database
  readonly #claims = new LocalClaims()
  readonly #statements

  constructor(db: BetterSqlite3.Database, options: SqliteOutboxOptions) {
    this.#options = options
    this.#db = db
    db.exec(SCHEMA)
    // A file an older version made: its deliveries were all Standard Webhooks'.
    const columns = db.pragma('table_info(webhook_deliveries)') as Array<{ name: string }>
    const hasPush = columns.some((column) => column.name === 'push')
    if (!hasPush) db.exec('ALTER TABLE webhook_deliveries ADD COLUMN push TEXT')
    this.#statements = {
      insert: db.prepare(
        'INSERT OR REPLACE INTO webhook_deliveries (id, run, caller, type, url, body, created_at, replica, state, ' +
          'attempts, next_attempt_at, ended_at, push) ' +
          'VALUES (@id, @run, @caller, @type, @url, @body, @createdAt, @replica, @state, @attempts, @nextAttemptAt, ' +
          'NULL, @push)'
      ),
      // Only while armed: a delivery already fired keeps the body its attempts sign, whoever fires it again.
      fire: db.prepare<[string, string, string]>(
        "UPDATE webhook_deliveries SET body = ?, state = 'pending', next_attempt_at = ? " +
          "WHERE id = ? AND state = 'armed'"
      ),
      due: db.prepare<[string, number]>(
        `SELECT ${COLUMNS} FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= ? ` +
          'ORDER BY next_attempt_at, created_at LIMIT ?'
      ),
      orphans: db.prepare<[string]>(
        `SELECT ${COLUMNS} FROM webhook_deliveries WHERE state = 'armed' AND replica != ? ORDER BY created_at`
      ),
      // Appended in SQLite: no attempt read before another is recorded can be lost.
      record: db.prepare(
        "UPDATE webhook_deliveries SET attempts = json_insert(attempts, '$[#]', json(@attempt)), state = @state, " +
          'next_attempt_at = @nextAttemptAt, ended_at = @endedAt WHERE id = @id'
      ),
      drop: db.prepare<[string, string]>(
        "UPDATE webhook_deliveries SET state = 'gone', next_attempt_at = NULL, ended_at = ? " +
          "WHERE id = ? AND state IN ('armed', 'pending')"
      ),
      ofRun: db.prepare<[string]>(`SELECT ${COLUMNS} FROM webhook_deliveries WHERE run = ? ORDER BY created_at`),
      pending: db.prepare<[]>("SELECT count(*) AS pending FROM webhook_deliveries WHERE state = 'pending'"),
      prune: db.prepare<[string]>('DELETE FROM webhook_deliveries WHERE ended_at < ?')
    }
  }

  async addDeliveries(deliveries: readonly WebhookDelivery[]): Promise<void> {
    this.#prune()
    const { insert } = this.#statements
    // All of a run's or none: its run.finished is never kept without its run.started.
    this.#db.transaction(() => {
      for (const delivery of deliveries) {
        const push = delivery.push === undefined ? null : JSON.stringify(delivery.push)
        insert.run({ ...delivery, attempts: JSON.stringify(delivery.attempts), push })
      }
    })()
  }

  async fireDelivery(id: string, body: string, at: Date): Promise<void> {
    this.#statements.fire.run(body, at.toISOString(), id)
  }

  async dropDelivery(id: string): Promise<void> {
    this.#statements.drop.run(new Date().toISOString(), id)
  }

  async dueDeliveries(now: Date, max: number): Promise<WebhookDelivery[]> {
    return (this.#statements.due.all(now.toISOString(), max) as DeliveryRow[]).map(toDelivery)
  }

  async orphanedDeliveries(): Promise<WebhookDelivery[]> {
    return (this.#statements.orphans.all(this.#options.replica) as DeliveryRow[]).map(toDelivery)
  }

  async claimDelivery(id: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.#claims.claim(id, holder, ttlMs)
  }

  async releaseDelivery(id: string, holder: string): Promise<void> {
    this.#claims.release(id, holder)
  }

  async recordAttempt(id: string, attempt: DeliveryAttempt, after: AfterAttempt): Promise<void> {
    this.#statements.record.run({
      id,
      attempt: JSON.stringify(attempt),
      state: after.state,
      nextAttemptAt: after.nextAttemptAt,
      endedAt: after.state === 'pending' ? null : attempt.at
    })
    this.#claims.releaseAny(id)
  }

  async deliveriesOf(run: string): Promise<WebhookDelivery[]> {
    return (this.#statements.ofRun.all(run) as DeliveryRow[]).map(toDelivery)
  }

  async pendingDeliveries(): Promise<number> {
    return (this.#statements.pending.get() as { pending: number }).pending
  }

  /** Ended deliveries are kept as long as finished runs are, from their last attempt. */
  #prune(): void {
    this.#statements.prune.run(new Date(Date.now() - this.#options.retentionMs).toISOString())
  }
}

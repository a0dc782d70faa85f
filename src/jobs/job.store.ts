import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { DeliveryStore } from './delivery.store';
import { EventStore } from './event.store';
import { IdempotencyStore } from './idempotency.store';
import { RuntimeStore } from './runtime.store';
import { upgradeJobRecord, type JobRecord, type JobStatus } from './job.model';

/** The job records' format, kept in the database's user_version: 0, an older build's flat fields plus a `params` bag;
 * 1, one typed task per kind (job.model.ts). Opening an older database rewrites its records once, in one transaction. */
export const JOB_RECORD_FORMAT = 1;

const parse = (r: { record: string }): JobRecord => upgradeJobRecord(JSON.parse(r.record));

/** Job records in SQLite (WAL: a committed write survives kill -9). Order of creation is the rowid `seq`,
 * which is also the FIFO order queued jobs resume in after a restart. */
export class JobStore {
  private readonly db: Database.Database;
  private readonly stmts;
  /** Callback deliveries, in the same database. */
  readonly deliveries: DeliveryStore;
  /** Measured runtimes, for the ETA. */
  readonly runtimes: RuntimeStore;
  /** Job events, for the live streams. */
  readonly events: EventStore;
  /** Idempotency-Key records of the create endpoints. */
  readonly idempotency: IdempotencyStore;

  constructor(dataDir: string) {
    mkdirSync(dataDir, { recursive: true });
    this.db = new Database(join(dataDir, 'jobs.sqlite'));
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec(`CREATE TABLE IF NOT EXISTS jobs (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      id TEXT NOT NULL UNIQUE,
      kind TEXT NOT NULL,
      status TEXT NOT NULL,
      created REAL NOT NULL,
      record TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS jobs_status ON jobs(status);
    CREATE TABLE IF NOT EXISTS expired (id TEXT PRIMARY KEY, at REAL NOT NULL);
    CREATE TABLE IF NOT EXISTS reserved_ids (id TEXT PRIMARY KEY, at REAL NOT NULL);`);
    this.migrate();
    this.deliveries = new DeliveryStore(this.db);
    this.runtimes = new RuntimeStore(this.db);
    this.events = new EventStore(this.db);
    this.idempotency = new IdempotencyStore(this.db);
    this.stmts = {
      insert: this.db.prepare('INSERT INTO jobs (id, kind, status, created, record) VALUES (@id, @kind, @status, @created, @record)'),
      update: this.db.prepare('UPDATE jobs SET status = @status, record = @record WHERE id = @id'),
      get: this.db.prepare('SELECT record FROM jobs WHERE id = ?'),
      has: this.db.prepare('SELECT 1 FROM jobs WHERE id = ?'),
      del: this.db.prepare('DELETE FROM jobs WHERE id = ?'),
      byStatus: this.db.prepare('SELECT record FROM jobs WHERE status = ? ORDER BY seq'),
      count: this.db.prepare('SELECT COUNT(*) AS n FROM jobs'),
      endedBefore: this.db.prepare("SELECT record FROM jobs WHERE status IN ('done', 'failed') AND json_extract(record, '$.finished') < ? ORDER BY seq LIMIT 500"),
      tombstone: this.db.prepare('INSERT OR REPLACE INTO expired (id, at) VALUES (?, ?)'),
      expiredAt: this.db.prepare('SELECT at FROM expired WHERE id = ?'),
      pruneTombstones: this.db.prepare('DELETE FROM expired WHERE at < ?'),
      reserve: this.db.prepare('INSERT INTO reserved_ids (id, at) SELECT @id, @at WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE id = @id) ON CONFLICT (id) DO NOTHING'),
      pruneReserved: this.db.prepare('DELETE FROM reserved_ids WHERE at < ?'),
    };
  }

  /** Rewrites the records of an older format in this build's (a DATA_DIR of an older build opens as it was). A record an
   * older process writes afterwards is still read right: every read goes through upgradeJobRecord. */
  private migrate(): void {
    const format = this.db.pragma('user_version', { simple: true }) as number;
    if (format >= JOB_RECORD_FORMAT) return;
    this.db.transaction(() => {
      const rows = this.db.prepare('SELECT seq, record FROM jobs').all() as { seq: number; record: string }[];
      const write = this.db.prepare('UPDATE jobs SET record = ? WHERE seq = ?');
      for (const row of rows) write.run(JSON.stringify(parse(row)), row.seq);
      this.db.pragma(`user_version = ${JOB_RECORD_FORMAT}`);
    })();
  }

  insert(job: JobRecord): void {
    this.stmts.insert.run({ id: job.id, kind: job.kind, status: job.status, created: job.created, record: JSON.stringify(job) });
  }

  update(job: JobRecord): void {
    this.stmts.update.run({ id: job.id, status: job.status, record: JSON.stringify(job) });
  }

  get(id: string): JobRecord | undefined {
    const row = this.stmts.get.get(id) as { record: string } | undefined;
    return row ? parse(row) : undefined;
  }

  /** Takes a new job's id for this process before anything is saved under it (its inputs' folder): false when a job
   * or another process (any process on this database) has it already. A reservation outlives its job until
   * pruneTombstones forgets it, so an id is not handed out twice. */
  reserveId(id: string, at = Date.now() / 1000): boolean {
    return this.stmts.reserve.run({ id, at }).changes === 1;
  }

  has(id: string): boolean {
    return this.stmts.has.get(id) !== undefined;
  }

  delete(id: string): void {
    this.stmts.del.run(id);
  }

  withStatus(status: JobStatus): JobRecord[] {
    return (this.stmts.byStatus.all(status) as { record: string }[]).map(parse);
  }

  /** Finished (done or failed) jobs that ended before `finished` (Unix seconds), oldest first, a page at a time. */
  endedBefore(finished: number): JobRecord[] {
    return (this.stmts.endedBefore.all(finished) as { record: string }[]).map(parse);
  }

  /** Deletes an expired job's record and remembers when it expired (a later GET says why it is gone). */
  expire(id: string, at: number): void {
    this.db.transaction(() => {
      this.stmts.del.run(id);
      this.stmts.tombstone.run(id, at);
    })();
  }

  /** When the job expired and was deleted, or undefined. */
  expiredAt(id: string): number | undefined {
    return (this.stmts.expiredAt.get(id) as { at: number } | undefined)?.at;
  }

  /** Forgets expiries, and id reservations, older than `before`. */
  pruneTombstones(before: number): void {
    this.stmts.pruneTombstones.run(before);
    this.stmts.pruneReserved.run(before);
  }

  count(): number {
    return (this.stmts.count.get() as { n: number }).n;
  }

  /** Prepared once per filter combination (at most four): listing is the API's hottest read. */
  private readonly listStmts = new Map<string, { count: Database.Statement; page: Database.Statement }>();

  /** Newest first. `kind`/`status` filter; `limit`/`offset` page. */
  list(opts: { kind?: string; status?: string; limit: number; offset: number }): { total: number; jobs: JobRecord[] } {
    const where: string[] = [];
    const args: unknown[] = [];
    if (opts.kind) (where.push('kind = ?'), args.push(opts.kind));
    if (opts.status) (where.push('status = ?'), args.push(opts.status));
    const w = where.length ? `WHERE ${where.join(' AND ')}` : '';
    let stmts = this.listStmts.get(w);
    if (!stmts) {
      stmts = {
        count: this.db.prepare(`SELECT COUNT(*) AS n FROM jobs ${w}`),
        page: this.db.prepare(`SELECT record FROM jobs ${w} ORDER BY seq DESC LIMIT ? OFFSET ?`),
      };
      this.listStmts.set(w, stmts);
    }
    const total = (stmts.count.get(...args) as { n: number }).n;
    const rows = stmts.page.all(...args, opts.limit, opts.offset) as { record: string }[];
    return { total, jobs: rows.map(parse) };
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

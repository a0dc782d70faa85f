import type Database from 'better-sqlite3';

/** One callback delivery: the job object as it was when the job ended, to POST to `url` until it is answered. */
export interface Delivery {
  /** Stable across attempts and restarts: `<job id>.<event>`. */
  id: string;
  job_id: string;
  url: string;
  /** The JSON body, fixed when the delivery was made (every attempt sends the same bytes). */
  body: string;
  /** Attempts made so far. */
  attempts: number;
  /** Unix seconds the next attempt is due. */
  next_at: number;
  created: number;
  state: 'pending' | 'delivered' | 'failed';
  /** The last HTTP status received, if any. */
  last_status: number | null;
}

/** Callback deliveries in the job database (same file, same WAL durability as the jobs): a delivery waiting in its
 * retry back-off survives a kill and is resumed at the next start. */
export class DeliveryStore {
  private readonly stmts;

  constructor(db: Database.Database) {
    db.exec(`CREATE TABLE IF NOT EXISTS deliveries (
      id TEXT PRIMARY KEY,
      job_id TEXT NOT NULL,
      url TEXT NOT NULL,
      body TEXT NOT NULL,
      attempts INTEGER NOT NULL,
      next_at REAL NOT NULL,
      created REAL NOT NULL,
      state TEXT NOT NULL,
      last_status INTEGER
    );
    CREATE INDEX IF NOT EXISTS deliveries_state ON deliveries(state);`);
    this.stmts = {
      // a job's end is delivered once: a second insert of the same id (a replayed end) keeps the first
      insert: db.prepare('INSERT OR IGNORE INTO deliveries (id, job_id, url, body, attempts, next_at, created, state, last_status) VALUES (@id, @job_id, @url, @body, @attempts, @next_at, @created, @state, @last_status)'),
      update: db.prepare('UPDATE deliveries SET attempts = @attempts, next_at = @next_at, state = @state, last_status = @last_status WHERE id = @id'),
      get: db.prepare('SELECT * FROM deliveries WHERE id = ?'),
      pending: db.prepare("SELECT * FROM deliveries WHERE state = 'pending' ORDER BY next_at"),
      forJob: db.prepare('DELETE FROM deliveries WHERE job_id = ? AND state != \'pending\''),
    };
  }

  /** Stores a new delivery; false if one with its id exists already. */
  insert(d: Delivery): boolean {
    return this.stmts.insert.run(d).changes === 1;
  }

  update(d: Delivery): void {
    this.stmts.update.run(d);
  }

  get(id: string): Delivery | undefined {
    return this.stmts.get.get(id) as Delivery | undefined;
  }

  pending(): Delivery[] {
    return this.stmts.pending.all() as Delivery[];
  }

  /** Forgets a deleted job's finished deliveries (pending ones still go out: the job ended before it was deleted). */
  forgetJob(jobId: string): void {
    this.stmts.forJob.run(jobId);
  }
}

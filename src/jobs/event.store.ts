import type Database from 'better-sqlite3';

/** Job events (README "Live job events"): `queued`, `running`, `stage`, `progress`, `done`, `failed`. */
export type JobEventType = 'queued' | 'running' | 'stage' | 'progress' | 'preview' | 'done' | 'failed';

export interface StoredEvent {
  /** Global order over all jobs (the id of GET /api/events). */
  seq: number;
  job_id: string;
  /** The job's own sequence, from 1 (the id of GET /api/jobs/{id}/events). */
  n: number;
  type: JobEventType;
  /** JSON: the job object, or for stage/progress a delta with id and status. */
  data: string;
  at: number;
}

/** Job events in the job database, so a client that reconnects (even across a restart) resumes without gaps. They
 * go with their job when it is deleted. */
export class EventStore {
  private readonly stmts;
  /** Each job's last n, so appending needs no read. */
  private readonly lastN = new Map<string, number>();

  constructor(db: Database.Database) {
    db.exec(`CREATE TABLE IF NOT EXISTS events (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      job_id TEXT NOT NULL,
      n INTEGER NOT NULL,
      type TEXT NOT NULL,
      data TEXT NOT NULL,
      at REAL NOT NULL
    );
    CREATE INDEX IF NOT EXISTS events_job ON events(job_id, n);`);
    this.stmts = {
      insert: db.prepare('INSERT INTO events (job_id, n, type, data, at) VALUES (@job_id, @n, @type, @data, @at)'),
      maxN: db.prepare('SELECT MAX(n) AS n FROM events WHERE job_id = ?'),
      forJob: db.prepare('SELECT * FROM events WHERE job_id = ? AND n > ? ORDER BY n'),
      since: db.prepare('SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?'),
      last: db.prepare('SELECT MAX(seq) AS seq FROM events'),
      del: db.prepare('DELETE FROM events WHERE job_id = ?'),
    };
  }

  append(jobId: string, type: JobEventType, data: object): StoredEvent {
    const n = (this.lastN.get(jobId) ?? ((this.stmts.maxN.get(jobId) as { n: number | null }).n ?? 0)) + 1;
    const row = { job_id: jobId, n, type, data: JSON.stringify(data), at: Date.now() / 1000 };
    const seq = Number(this.stmts.insert.run(row).lastInsertRowid);
    this.lastN.set(jobId, n);
    return { seq, ...row };
  }

  /** The job's events after its n-th, in order. */
  forJob(jobId: string, afterN: number): StoredEvent[] {
    return this.stmts.forJob.all(jobId, afterN) as StoredEvent[];
  }

  /** Events of every job after global seq `after`, at most `limit`. */
  since(after: number, limit: number): StoredEvent[] {
    return this.stmts.since.all(after, limit) as StoredEvent[];
  }

  lastSeq(): number {
    return (this.stmts.last.get() as { seq: number | null }).seq ?? 0;
  }

  deleteJob(jobId: string): void {
    this.stmts.del.run(jobId);
    this.lastN.delete(jobId);
  }
}

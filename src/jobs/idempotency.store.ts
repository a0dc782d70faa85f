import type Database from 'better-sqlite3';

/** A remembered create: the request's fingerprint, and the job it made (null while the first request runs). */
export interface IdempotentCreate {
  key: string;
  fingerprint: string;
  job_id: string | null;
  created: number;
}

/** Idempotency-Key records in the job database, kept 24 hours. */
export class IdempotencyStore {
  private readonly stmts;

  constructor(db: Database.Database) {
    db.exec('CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, job_id TEXT, created REAL NOT NULL)');
    this.stmts = {
      get: db.prepare('SELECT * FROM idempotency WHERE key = ?'),
      claim: db.prepare('INSERT OR IGNORE INTO idempotency (key, fingerprint, job_id, created) VALUES (?, ?, NULL, ?)'),
      done: db.prepare('UPDATE idempotency SET job_id = ? WHERE key = ?'),
      release: db.prepare('DELETE FROM idempotency WHERE key = ? AND job_id IS NULL'),
      expire: db.prepare('DELETE FROM idempotency WHERE created < ?'),
    };
  }

  get(key: string): IdempotentCreate | undefined {
    return this.stmts.get.get(key) as IdempotentCreate | undefined;
  }

  /** Takes the key for a new request; false if a record holds it. */
  claim(key: string, fingerprint: string, now: number): boolean {
    return this.stmts.claim.run(key, fingerprint, now).changes === 1;
  }

  done(key: string, jobId: string): void {
    this.stmts.done.run(jobId, key);
  }

  /** Frees a key whose request failed (no job was made), so it can be sent again. */
  release(key: string): void {
    this.stmts.release.run(key);
  }

  /** Forgets keys older than `before` (Unix seconds). */
  expire(before: number): void {
    this.stmts.expire.run(before);
  }
}

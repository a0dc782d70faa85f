import type Database from 'better-sqlite3';
import type { RuntimeStats } from '../scheduler/eta';

/** How many of the latest measurements a mean follows: past this many, each new one weighs 1/20, so the estimate
 * follows a machine whose speed changed (a driver update, another GPU) instead of averaging over all history. */
const WINDOW = 20;

/** Measured seconds per runtime class and per model load, as running means in the job database (the ETA's memory:
 * it survives restarts). */
export class RuntimeStore implements RuntimeStats {
  private readonly stmts;
  private readonly cache = new Map<string, number>();

  constructor(db: Database.Database) {
    db.exec('CREATE TABLE IF NOT EXISTS runtimes (key TEXT PRIMARY KEY, n INTEGER NOT NULL, mean_s REAL NOT NULL)');
    this.stmts = {
      all: db.prepare('SELECT key, n, mean_s FROM runtimes'),
      upsert: db.prepare('INSERT INTO runtimes (key, n, mean_s) VALUES (@key, @n, @mean_s) ON CONFLICT(key) DO UPDATE SET n = @n, mean_s = @mean_s'),
      get: db.prepare('SELECT n, mean_s FROM runtimes WHERE key = ?'),
    };
    for (const r of this.stmts.all.all() as { key: string; mean_s: number }[]) this.cache.set(r.key, r.mean_s);
  }

  get(key: string): number | undefined {
    return this.cache.get(key);
  }

  add(key: string, seconds: number): void {
    const row = this.stmts.get.get(key) as { n: number; mean_s: number } | undefined;
    const n = (row?.n ?? 0) + 1;
    const mean = row ? row.mean_s + (seconds - row.mean_s) / Math.min(n, WINDOW) : seconds;
    this.stmts.upsert.run({ key, n, mean_s: mean });
    this.cache.set(key, mean);
  }
}

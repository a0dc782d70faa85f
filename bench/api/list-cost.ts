// Where the CPU time of one GET /api/jobs (default page: 100 of 1000 jobs) goes, piece by piece, without HTTP:
// node build/bench/bench/api/list-cost.js. Medians of many runs, so other load on the box matters less than in
// the HTTP benchmark. Also the per-request cost of the token check, for comparison.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { tokenMatches } from '../../src/auth/token';
import { JobRecord, toJobObject } from '../../src/jobs/job.model';
import { JobStore } from '../../src/jobs/job.store';
import { seedJobs } from './seed';

function median(fn: () => unknown, runs = 2000): number {
  for (let i = 0; i < 200; i++) fn(); // warm-up
  const t: number[] = [];
  for (let i = 0; i < runs; i++) {
    const s = process.hrtime.bigint();
    fn();
    t.push(Number(process.hrtime.bigint() - s) / 1000);
  }
  return t.sort((a, b) => a - b)[runs >> 1];
}

const dir = mkdtempSync(join(os.tmpdir(), 'kiln-listcost-'));
try {
  seedJobs(dir, 1000);
  const store = new JobStore(dir);
  const db = new Database(join(dir, 'jobs.sqlite'), { readonly: true });
  const countSql = 'SELECT COUNT(*) AS n FROM jobs ';
  const pageSql = 'SELECT record FROM jobs  ORDER BY seq DESC LIMIT ? OFFSET ?';
  const page = db.prepare(pageSql);
  const rows = page.all(100, 0) as { record: string }[];
  const records = rows.map((r) => JSON.parse(r.record) as JobRecord);
  const views = records.map((j) => toJobObject(j, {}));
  const body = JSON.stringify(views);

  const parts: [string, number][] = [
    ['JobStore.list({limit: 100}) whole', median(() => store.list({ limit: 100, offset: 0 }))],
    ['  prepare COUNT + SELECT (done per call)', median(() => (db.prepare(countSql), db.prepare(pageSql)))],
    ['  COUNT(*) of 1000 rows', median(() => db.prepare(countSql).get())],
    ['  SELECT 100 records (prepared)', median(() => page.all(100, 0))],
    ['  JSON.parse of 100 records', median(() => rows.map((r) => JSON.parse(r.record)))],
    ['toJobObject x 100', median(() => records.map((j) => toJobObject(j, {})))],
    ['JSON.stringify of the page', median(() => JSON.stringify(views))],
    ['token check (2 x sha256 + timingSafeEqual)', median(() => tokenMatches('bench-token-0123456789', 'bench-token-0123456789'))],
  ];
  console.log(`GET /api/jobs pieces (median µs), page body ${Math.round(body.length / 1024)} KiB, ${os.cpus()[0]?.model.trim()}, load average ${os.loadavg()[0].toFixed(1)}`);
  for (const [name, us] of parts) console.log(`${name.padEnd(48)} ${us.toFixed(1).padStart(8)}`);
  store.close();
  db.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// Cluster benchmark (npm run bench:cluster): Debian's redis-server and s3rver on free ports, the API in this
// process (QUEUE=redis WORKERS=none STORAGE=s3, as an API node runs) and GPU worker processes of this build
// serving a no-op pipeline (noop-pipeline.ts) that writes its own clock readings as the output.
//   dispatch    one job at a time on one worker: accepted by the API (job.created) -> the run begins in the worker,
//               and the run ends -> the API has the job done (job.finished; this includes the upload to the object
//               store and BullMQ's completed event). Goal: p99 < 50 ms each.
//   throughput  BENCH_JOBS jobs of BENCH_RUN_MS each, all submitted at once, on 1 and then 2 workers: jobs per minute
//               from the first accepted to the last done. Goal: 2 workers within 5% of twice 1 worker.
// BENCH_DISPATCH_JOBS (200), BENCH_JOBS (40), BENCH_RUN_MS (500) change the sizes.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { auth, startApp, type TestApp } from '../../test/api/harness';
import { startRedis, startS3, startWorker, type RedisServer, type S3Server, type WorkerProcess } from '../../test/cluster/services';
import { noopPipeline, type RunClock } from './noop-pipeline';

const DISPATCH_JOBS = Number(process.env.BENCH_DISPATCH_JOBS ?? 200);
const JOBS = Number(process.env.BENCH_JOBS ?? 40);
const RUN_MS = Number(process.env.BENCH_RUN_MS ?? 500);
const PROFILE = 'fastvid';

type Job = Record<string, any>;

interface Fleet {
  t: TestApp;
  workers: WorkerProcess[];
  close(): Promise<void>;
}

async function fleet(redis: RedisServer, s3: S3Server, n: number, runMs: number): Promise<Fleet> {
  // each fleet has its own queues: worker names are unique per fleet
  const tag = Math.random().toString(36).slice(2, 6);
  const workers = Array.from({ length: n }, (_, i) => startWorker(`bench-${tag}-${i + 1}`, { REDIS_URL: redis.url, ...s3.env }, { builtins: false, pipelines: [noopPipeline(PROFILE, runMs)] }));
  const dataDir = mkdtempSync(join(os.tmpdir(), 'kiln-bench-cluster-'));
  const t = await startApp({ dataDir, builtinPipelines: false, env: { QUEUE: 'redis', REDIS_URL: redis.url, WORKERS: 'none', ...s3.env, MAX_QUEUE: '100000' } });
  const end = Date.now() + 60_000;
  for (;;) {
    const ws = ((await t.http.get('/api/status').set(auth)).body.workers ?? []) as Job[];
    if (ws.filter((w) => w.state === 'ready' && w.name.includes(tag)).length === n) break;
    if (Date.now() > end) throw new Error(`workers never ready: ${JSON.stringify(ws)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    t,
    workers,
    async close() {
      await t.close(true);
      await Promise.all(workers.map((w) => w.stop()));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

const post = async (t: TestApp, body: object): Promise<Job> => {
  const res = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'bench', seconds: 1, steps: 1, ...body });
  if (res.status !== 200) throw new Error(`POST: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as Job;
};

async function clockOf(t: TestApp, id: string): Promise<RunClock> {
  const res = await t.http.get(`/api/jobs/${id}/video`).set(auth).buffer(true).parse((r, cb) => {
    const parts: Buffer[] = [];
    r.on('data', (c: Buffer) => parts.push(c));
    r.on('end', () => cb(null, Buffer.concat(parts)));
  });
  return JSON.parse((res.body as Buffer).toString()) as RunClock;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};
const fmt = (x: number) => x.toFixed(1);

async function dispatch(f: Fleet): Promise<{ toStart: number[]; toDone: number[]; roundTrip: number[] }> {
  const toStart: number[] = [];
  const toDone: number[] = [];
  const roundTrip: number[] = [];
  for (let i = 0; i < DISPATCH_JOBS + 5; i++) {
    const t0 = performance.now();
    const j = await post(f.t, { wait: true, timeout: 30 });
    const rt = performance.now() - t0;
    if (j.status !== 'done') throw new Error(`job ${j.id}: ${j.status} ${j.error ?? ''}`);
    const c = await clockOf(f.t, j.id);
    if (i < 5) continue; // warm-up
    toStart.push(c.start - j.created * 1000);
    toDone.push(j.finished * 1000 - c.end);
    roundTrip.push(rt - (c.end - c.start));
  }
  return { toStart, toDone, roundTrip };
}

async function throughput(f: Fleet): Promise<{ perMin: number; spanS: number }> {
  await post(f.t, { wait: true, timeout: 30 }); // warm-up
  const ids: string[] = [];
  for (let i = 0; i < JOBS; i++) ids.push((await post(f.t, {})).id);
  const jobs: Job[] = [];
  for (const id of ids) {
    for (;;) {
      const j = (await f.t.http.get(`/api/jobs/${id}?wait=true&timeout=60`).set(auth)).body as Job;
      if (j.status === 'done' || j.status === 'failed') {
        if (j.status !== 'done') throw new Error(`job ${id} failed: ${j.error}`);
        jobs.push(j);
        break;
      }
    }
  }
  const spanS = Math.max(...jobs.map((j) => j.finished)) - Math.min(...jobs.map((j) => j.created));
  return { perMin: (JOBS / spanS) * 60, spanS };
}

async function main() {
  const redis = await startRedis();
  const s3 = await startS3();
  try {
    console.log(`cluster bench on ${os.cpus()[0]?.model ?? 'unknown'} x${os.cpus().length}, ${new Date().toISOString()}`);
    let f = await fleet(redis, s3, 1, 0);
    const d = await dispatch(f);
    await f.close();
    console.log(`\ndispatch, ${DISPATCH_JOBS} jobs one at a time, 1 worker, no-op run (ms):`);
    console.log('                                   p50     p99     max');
    for (const [name, xs] of [['accepted -> run begins (worker)', d.toStart], ['run ends -> job done (API)', d.toDone], ['POST wait=true round trip - run', d.roundTrip]] as const) {
      console.log(`${name.padEnd(34)} ${fmt(pct(xs, 50)).padStart(6)}  ${fmt(pct(xs, 99)).padStart(6)}  ${fmt(Math.max(...xs)).padStart(6)}`);
    }
    const rows: { workers: number; perMin: number; spanS: number }[] = [];
    for (const n of [1, 2]) {
      f = await fleet(redis, s3, n, RUN_MS);
      rows.push({ workers: n, ...(await throughput(f)) });
      await f.close();
    }
    console.log(`\nthroughput, ${JOBS} jobs of ${RUN_MS} ms submitted at once (ideal ${fmt(60_000 / RUN_MS)} jobs/min per worker):`);
    for (const r of rows) console.log(`${r.workers} worker(s): ${fmt(r.perMin)} jobs/min (${r.spanS.toFixed(2)} s)`);
    const ratio = rows[1]!.perMin / rows[0]!.perMin;
    console.log(`2 workers / 1 worker: ${ratio.toFixed(3)} (goal >= 1.9)`);
    console.log(JSON.stringify({ dispatch: { toStartP50: pct(d.toStart, 50), toStartP99: pct(d.toStart, 99), toDoneP50: pct(d.toDone, 50), toDoneP99: pct(d.toDone, 99) }, throughput: rows, ratio }));
  } finally {
    await s3.stop();
    await redis.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);

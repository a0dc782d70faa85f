// API benchmark (npm run bench:api): the real service in a child process on a temp data dir holding 1000
// finished jobs; the load generators in this process. Measures GET /api/status, GET /api/jobs (default page of
// 100) and GET /api/jobs/{id}, each at 500 req/s (paced evenly, and as autocannon's overallRate) and flat out;
// then 200 concurrent waiters (GET /api/jobs/{id}?wait=true&timeout=30) on queued jobs held by a gated pipeline
// while /api/status is measured again, then releases them; last, /api/status at 200 req/s while the service's own
// models (demo weights) load and run an image and a video job (gpuScenario). Prints a table (RPS, p50, p99, server
// RSS/heap). BENCH_SECONDS changes the 10 s runs, BENCH_RATE the 500 req/s, BENCH_GPU_RATE / BENCH_GPU_STEPS the
// last scenario's 200 req/s and 2 steps, BENCH_ONLY picks scenarios (see main).
import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import { paced } from './paced';
import type { ServerStats } from './server';
import { seedJobs } from './seed';

// autocannon ships no types; this is the part of its programmatic API used here.
interface Histogram { average: number; p50: number; p99: number; max: number }
interface CannonResult { requests: Histogram & { total: number }; latency: Histogram; non2xx: number; errors: number; timeouts: number }
interface CannonOptions {
  url: string; connections: number; duration: number; overallRate?: number; ignoreCoordinatedOmission?: boolean; headers?: Record<string, string>;
  requests?: { setupRequest: (req: Record<string, unknown>) => Record<string, unknown> }[];
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon = require('autocannon') as (o: CannonOptions) => Promise<CannonResult>;

const TOKEN = 'bench-token-0123456789';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const RATE = Number(process.env.BENCH_RATE ?? 500);
const WAITERS = 200;
const QUEUED = 50;
// The waiters must outlast the two runs made while they wait (paced and max, no warm-up: the server is warm).
const WAIT_TIMEOUT_S = Math.max(30, 2 * SECONDS + 8);

interface Row { scenario: string; load: string; rps: number; p50: number; p99: number; max: number; bad: number; rssMb: number; heapMb: number }

class Server {
  private pending: ((s: ServerStats) => void)[] = [];
  private constructor(readonly child: ChildProcess, readonly url: string) {
    child.on('message', (m: { stats?: ServerStats }) => m.stats && this.pending.shift()?.(m.stats));
  }

  static start(dataDir: string, env: Record<string, string> = {}): Promise<Server> {
    // BENCH_NODE_ARGS: e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the server (written when it exits).
    const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...nodeArgs, join(__dirname, 'server.js')], {
      env: { ...process.env, DATA_DIR: dataDir, API_TOKEN: TOKEN, LOG_LEVEL: process.env.LOG_LEVEL ?? 'info', ...env },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'], // info logs as in production, written to a discarded pipe
    });
    return new Promise((resolve, reject) => {
      child.once('message', (m: { url: string }) => resolve(new Server(child, m.url)));
      child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
    });
  }

  /** Closing the IPC channel makes the server exit normally (so a --cpu-prof profile gets written). */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.disconnect();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }

  send(cmd: 'hold' | 'release'): void {
    this.child.send({ cmd });
  }

  stats(): Promise<ServerStats> {
    return new Promise((resolve) => {
      this.pending.push(resolve);
      this.child.send({ cmd: 'stats' });
    });
  }

  /** Peak RSS and heap over the span of `work`, sampled every 250 ms. */
  async peakDuring<T>(work: Promise<T>): Promise<{ result: T; rss: number; heap: number }> {
    let rss = 0;
    let heap = 0;
    const sample = async () => {
      const s = await this.stats();
      rss = Math.max(rss, s.rss);
      heap = Math.max(heap, s.heapUsed);
    };
    const timer = setInterval(() => void sample(), 250);
    try {
      const result = await work;
      await sample();
      return { result, rss, heap };
    } finally {
      clearInterval(timer);
    }
  }
}

const auth = { authorization: `Bearer ${TOKEN}` };
const mb = (b: number) => Math.round(b / 1048576);

function cannon(srv: Server, path: string | (() => string), o: { seconds: number; connections: number; rate?: number }): Promise<CannonResult> {
  // ignoreCoordinatedOmission: autocannon's correction assumes a 1 ms interval at any rate (see paced.ts).
  const opts: CannonOptions = { url: srv.url, connections: o.connections, duration: o.seconds, overallRate: o.rate, ignoreCoordinatedOmission: !!o.rate, headers: auth };
  if (typeof path === 'function') opts.requests = [{ setupRequest: (req) => ({ ...req, path: path() }) }];
  else opts.url = srv.url + path;
  return autocannon(opts);
}

type Load = 'paced' | 'bursts' | 'max';
const LOAD_LABEL: Record<Load, string> = { paced: `${RATE}/s paced`, bursts: `${RATE}/s autocannon`, max: 'max (32 conn)' };

/** 2 s unmeasured warm-up (JIT, statement cache), then `SECONDS` of: requests paced evenly at RATE (the goal's
 * figure), autocannon overallRate=RATE on 20 connections (1 s bursts), or autocannon flat out on 32. */
async function measure(srv: Server, scenario: string, path: string | (() => string), load: Load, warm = true): Promise<Row> {
  if (warm) await cannon(srv, path, { seconds: 2, connections: 8 });
  const next = typeof path === 'function' ? path : () => path;
  if (load === 'paced') {
    const { result: r, rss, heap } = await srv.peakDuring(paced(srv.url, next, { rate: RATE, seconds: SECONDS, headers: auth }));
    return { scenario, load: LOAD_LABEL[load], rps: r.rps, p50: r.p50, p99: r.p99, max: r.max, bad: r.bad, rssMb: mb(rss), heapMb: mb(heap) };
  }
  const rate = load === 'bursts' ? RATE : undefined;
  const { result: r, rss, heap } = await srv.peakDuring(cannon(srv, path, { seconds: SECONDS, connections: rate ? 20 : 32, rate }));
  return {
    scenario, load: LOAD_LABEL[load], rps: Math.round(r.requests.total / SECONDS), p50: r.latency.p50, p99: r.latency.p99,
    max: r.latency.max, bad: r.non2xx + r.errors + r.timeouts, rssMb: mb(rss), heapMb: mb(heap),
  };
}

/** JSON request over a keep-alive agent with unlimited sockets (200 waiters are 200 open connections). */
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
function request(srv: Server, method: string, path: string, body?: object): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const data = body ? JSON.stringify(body) : undefined;
    const req = http.request(srv.url + path, { method, agent, headers: { ...auth, ...(data ? { 'content-type': 'application/json' } : {}) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString() || 'null') }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

async function waitersScenario(srv: Server): Promise<{ rows: Row[]; release: { p50: number; p99: number; max: number; done: number } }> {
  srv.send('hold');
  const create = () => request(srv, 'POST', '/api/v1/image', { prompt: 'bench', steps: 1 }).then((r) => r.json.id as string);
  const running = await create();
  const queued: string[] = [];
  for (let i = 0; i < QUEUED; i++) queued.push(await create());
  while ((await request(srv, 'GET', `/api/jobs/${running}`)).json.status !== 'running') await sleep(20);

  let released = 0;
  const waits = Array.from({ length: WAITERS }, (_, i) =>
    request(srv, 'GET', `/api/jobs/${queued[i % QUEUED]}?wait=true&timeout=${WAIT_TIMEOUT_S}`).then((r) => ({ status: r.json.status as string, after: performance.now() - released })),
  );
  while ((await srv.stats()).waiters < WAITERS) await sleep(20);
  const before = await srv.stats();
  const during: Row[] = [];
  for (const load of ['paced', 'max'] as const) during.push(await measure(srv, `GET /api/status, ${WAITERS} waiters`, '/api/status', load, false));
  const still = (await srv.stats()).waiters;
  if (still !== WAITERS) throw new Error(`waiters resolved early: ${still} of ${WAITERS} still waiting`);

  released = performance.now();
  srv.send('release');
  const { result: outcomes, rss, heap } = await srv.peakDuring(Promise.all(waits));
  const lat = outcomes.map((o) => o.after).sort((a, b) => a - b);
  const pct = (p: number) => Math.round(lat[Math.min(lat.length - 1, Math.floor((p / 100) * lat.length))]);
  const release = { p50: pct(50), p99: pct(99), max: Math.round(lat[lat.length - 1]), done: outcomes.filter((o) => o.status === 'done').length };
  const releaseRow: Row = { scenario: `release: ${WAITERS} waiters answered as their ${QUEUED} jobs run in turn`, load: '-', rps: 0, p50: release.p50, p99: release.p99, max: release.max, bad: WAITERS - release.done, rssMb: mb(rss), heapMb: mb(heap) };
  console.error(`waiters pending: rss ${mb(before.rss)} MB, heap ${mb(before.heapUsed)} MB`);
  return { rows: [...during, releaseRow], release };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const GPU_RATE = Number(process.env.BENCH_GPU_RATE ?? 200);
const GPU_STEPS = Number(process.env.BENCH_GPU_STEPS ?? 2);

/** GET /api/status paced at GPU_RATE while the service's own models (demo weights, generated once into
 * build/bench-demo-weights) load and run a 1024x1024 image job and a 1 s 352p video job, queued together: a
 * model load, the image's steps and VAE decode, a model switch, the video's steps, decodes and mux. A warm-up
 * pair (256x256 image, then video) first generates the demo checkpoints and compiles the kernels, so the
 * video model is loaded when the measured pair starts. */
async function gpuScenario(): Promise<{ row: Row; note: string }> {
  const dataDir = mkdtempSync(join(os.tmpdir(), 'kiln-bench-gpu-'));
  const weightsDir = mkdtempSync(join(os.tmpdir(), 'kiln-bench-noweights-'));
  const demoDir = join(__dirname, '..', '..', '..', 'bench-demo-weights'); // build/bench-demo-weights
  const srv = await Server.start(dataDir, { WEIGHTS_DIR: weightsDir, DEMO_WEIGHTS_DIR: demoDir, BENCH_BUILTIN: '1' });
  try {
    const run = async (path: string, body: object) => {
      const created = await request(srv, 'POST', path, body);
      if (created.status !== 200) throw new Error(`${path}: ${created.status} ${JSON.stringify(created.json)}`);
      return created.json.id as string;
    };
    const ended = async (id: string) => {
      for (;;) {
        const j = (await request(srv, 'GET', `/api/jobs/${id}?wait=true&timeout=1800`)).json;
        if (j.status === 'done') return j as { exec_s: number };
        if (j.status === 'failed') throw new Error(`bench job ${id} failed: ${j.error}`);
      }
    };
    const t0 = performance.now();
    await ended(await run('/api/v1/image', { prompt: 'warm-up', size: '256x256', steps: 2 }));
    await ended(await run('/api/v1/generate', { prompt: 'warm-up', seconds: 1, res: '352p', steps: 2 }));
    console.error(`gpu scenario: warm-up (demo checkpoints, kernels) took ${Math.round(performance.now() - t0)} ms`);
    const image = await run('/api/v1/image', { prompt: 'a red fox in the snow', size: '1024x1024', steps: GPU_STEPS });
    const video = await run('/api/v1/generate', { prompt: 'waves on a beach', seconds: 1, res: '352p', steps: GPU_STEPS });
    let done = false;
    const jobs = Promise.all([ended(image), ended(video)]).finally(() => (done = true));
    const { result: r, rss, heap } = await srv.peakDuring(paced(srv.url, () => '/api/status', { rate: GPU_RATE, seconds: 3600, headers: auth, until: () => done }));
    const [img, vid] = await jobs;
    const row: Row = {
      scenario: `GET /api/status while demo jobs load and run (image 1024x1024 + video 1 s 352p, ${GPU_STEPS} steps each)`,
      load: `${GPU_RATE}/s paced`, rps: r.rps, p50: r.p50, p99: r.p99, max: r.max, bad: r.bad, rssMb: mb(rss), heapMb: mb(heap),
    };
    return { row, note: `gpu scenario: ${r.sent} requests over the two jobs; image exec_s ${img.exec_s}, video exec_s ${vid.exec_s}` };
  } finally {
    await srv.stop();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(weightsDir, { recursive: true, force: true });
  }
}

function table(rows: Row[]): string {
  const head = ['scenario', 'load', 'RPS', 'p50 ms', 'p99 ms', 'max ms', 'errors', 'RSS MB', 'heap MB'];
  const cells = rows.map((r) => [r.scenario, r.load, r.rps ? String(r.rps) : '-', String(r.p50), String(r.p99), String(r.max), String(r.bad), String(r.rssMb), String(r.heapMb)]);
  const line = (c: string[]) => `| ${c.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...cells.map(line)].join('\n');
}

async function main(): Promise<void> {
  // Other work on the box skews every figure; the 1-minute load average is printed with the table.
  const load0 = os.loadavg()[0].toFixed(1);
  const dataDir = mkdtempSync(join(os.tmpdir(), 'kiln-bench-'));
  let srv: Server | undefined;
  try {
    const ids = seedJobs(dataDir, 1000);
    srv = await Server.start(dataDir);
    const idle = await srv.stats();
    console.error(`server up at ${srv.url}, 1000 stored jobs; idle rss ${mb(idle.rss)} MB, heap ${mb(idle.heapUsed)} MB`);
    let n = 0;
    const oneJob = () => `/api/jobs/${ids[(n = (n + 379) % ids.length)]}`; // 379 is prime to 1000: every row in turn
    const rows: Row[] = [];
    // BENCH_ONLY: a comma list of scenarios to run (status, list, one, waiters, gpu); all by default.
    const only = (name: string) => !process.env.BENCH_ONLY || process.env.BENCH_ONLY.split(',').includes(name);
    for (const [key, name, path] of [['status', 'GET /api/status', '/api/status'], ['list', 'GET /api/jobs (100 of 1000)', '/api/jobs'], ['one', 'GET /api/jobs/{id}', oneJob]] as const) {
      if (!only(key)) continue;
      for (const load of ['paced', 'bursts', 'max'] as const) rows.push(await measure(srv, name, path, load));
    }
    const w = only('waiters') ? await waitersScenario(srv) : undefined;
    if (w) rows.push(...w.rows);
    const gpu = only('gpu') ? await gpuScenario() : undefined;
    if (gpu) rows.push(gpu.row);
    const cpu = os.cpus();
    console.log(`\nAPI benchmark, ${new Date().toISOString().slice(0, 10)}, ${cpu.length} x ${cpu[0]?.model.trim()}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${SECONDS} s per run, load average ${load0} before, ${os.loadavg()[0].toFixed(1)} after\n`);
    console.log(table(rows));
    if (w) console.log(`\nwaiters: ${w.release.done}/${WAITERS} answered done after the release (p50 ${w.release.p50} ms, p99 ${w.release.p99} ms after it)`);
    if (gpu) console.log(`\n${gpu.note}`);
  } finally {
    await srv?.stop();
    agent.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

void main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});

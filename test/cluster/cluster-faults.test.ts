// Many hosts when things go wrong (issue 16's proof, second part): a real redis-server and s3rver, one API with
// QUEUE=redis WORKERS=none STORAGE=s3, and GPU worker processes of this build serving a gated test pipeline (real
// files, progress and cancellation, no model; test/api/test-pipelines.ts), so a test decides when each step runs.
//   kill -9 of a worker mid-job: its job fails naming the worker, the callback goes out, the other worker runs the rest
//   DELETE of a job running on a worker: the cancel reaches that process, the job ends interrupted
//   Redis stopped and restarted while jobs wait: the API answers, stores new jobs, says Redis is down; none is lost
//   the API restarted while workers run: their jobs finish and are recorded by the new API
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { makeGate, makeLog } from '../api/control';
import { auth, startApp, until, type TestApp } from '../api/harness';
import { dataUri, pngBytes, wavBytes } from '../api/inputs';
import { silentSpeech, testPipeline } from '../api/test-pipelines';
import { startRedis, startS3, startWorker, type RedisServer, type S3Server, type WorkerProcess } from './services';

type Job = Record<string, any>;
const STALL_S = 3;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Records every callback POST body. */
async function receiver() {
  const bodies: Job[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      bodies.push(JSON.parse(body) as Job);
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { bodies, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, close: () => server.close() };
}

describe('GPU workers on Redis: faults', () => {
  let redis: RedisServer;
  let s3: S3Server;
  let t: TestApp;
  let hook: Awaited<ReturnType<typeof receiver>>;
  const gate = makeGate();
  /** `run <job id>` each time a worker begins a job (load/unload too). */
  const log = makeLog();
  const workers = new Map<string, WorkerProcess>();
  let workerEnv: Record<string, string>;
  let apiEnv: Record<string, string>;

  const addWorker = (name: string) => {
    workers.set(name, startWorker(name, workerEnv, { builtins: false, pipelines: [testPipeline('image', 'imgmain', { gate, log }), silentSpeech()] }));
  };
  const post = async (prompt: string, extra: object = {}): Promise<Job> => {
    const res = await t.http.post('/api/v1/image').set(auth).send({ prompt, steps: 2, ...extra });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body as Job;
  };
  const job = async (id: string): Promise<Job> => (await t.http.get(`/api/jobs/${id}`).set(auth)).body as Job;
  /** Waits until `n` workers are ready (their heartbeats reached the API). */
  const readyWorkers = async (n: number) => {
    const end = Date.now() + 30_000;
    for (;;) {
      const ws = ((await t.http.get('/api/status').set(auth)).body.workers ?? []) as Job[];
      if (ws.filter((w) => w.state === 'ready').length >= n) return ws;
      if (Date.now() > end) throw new Error(`${n} workers never ready: ${JSON.stringify(ws)}`);
      await sleep(50);
    }
  };
  /** Every job done and idle: the gate open for good until the next test closes it. */
  const drain = async (ids: string[]) => {
    gate.openAll();
    const jobs: Job[] = [];
    for (const id of ids) jobs.push(await until(t, id, (j) => j.status === 'done' || j.status === 'failed', 30_000));
    return jobs;
  };

  before(async () => {
    redis = await startRedis();
    s3 = await startS3();
    hook = await receiver();
    workerEnv = { REDIS_URL: redis.url, ...s3.env };
    apiEnv = { QUEUE: 'redis', REDIS_URL: redis.url, WORKERS: 'none', ...s3.env, WORKER_STALL_S: String(STALL_S), ALLOW_PRIVATE_URLS: '1' };
    addWorker('gpu-a');
    addWorker('gpu-b');
    t = await startApp({ env: apiEnv, builtinPipelines: false });
    await readyWorkers(2);
  });
  after(async () => {
    gate.openAll();
    await t?.close(true);
    await Promise.all([...workers.values()].map((w) => w.stop()));
    hook?.close();
    await s3?.stop();
    await redis?.stop();
  });

  test('inputs and outputs travel through the object store: a speech request, an editing job with its picture', async () => {
    gate.openAll();
    const speech = await t.http.post('/api/v1/tts').set(auth).send({ text: 'hello from another host', ref_audio: dataUri('audio/wav', wavBytes(3.5)) });
    assert.equal(speech.status, 200, JSON.stringify(speech.body));
    const wav = await t.http.get(speech.body.audio).buffer(true);
    assert.equal(wav.status, 200);
    assert.equal(wav.body.subarray(0, 4).toString(), 'RIFF');
    const edit = await t.http.post('/api/images').set(auth).field('prompt', 'make Picture 1 blue').field('steps', '1').attach('images', await pngBytes(64, 48), 'in.png');
    assert.equal(edit.status, 200, JSON.stringify(edit.body));
    const done = await until(t, edit.body.id, (j) => j.status === 'done' || j.status === 'failed', 10_000);
    assert.equal(done.status, 'done', JSON.stringify(done));
    assert.equal((await t.http.get(`/api/jobs/${done.id}/image`).set(auth)).status, 200);
  });

  test('kill -9 of a worker mid-job: that job fails naming the worker (callback sent), the other worker runs the rest', async () => {
    gate.close();
    const a = await post('first', { callback_url: hook.url });
    const b = await post('second', { callback_url: hook.url });
    const queued = [await post('third'), await post('fourth')];
    // both begun in their workers (the sampling stage came from there): a job not begun would be handed on instead
    const sampling = (j: Job) => j.status === 'running' && j.stage === '采样';
    const [ra, rb] = [await until(t, a.id, sampling), await until(t, b.id, sampling)];
    assert.notEqual(ra.worker, rb.worker, 'one job on each worker');
    const victim = workers.get(ra.worker)!;
    const survivor = rb.worker as string;
    await victim.stop('SIGKILL');
    const failed = await until(t, a.id, (j) => j.status === 'failed', (STALL_S + 5) * 1000);
    assert.match(failed.error, new RegExp(`^GPU worker ${ra.worker} was lost while running this job`));
    const rest = await drain([b.id, ...queued.map((q) => q.id)]);
    for (const j of rest) assert.deepEqual([j.status, j.worker], ['done', survivor], JSON.stringify(j));
    // the failed job's callback went out, once; it never ran a second time
    const end = Date.now() + 5000;
    while (!hook.bodies.some((h) => h.id === a.id) && Date.now() < end) await sleep(20);
    const calls = hook.bodies.filter((h) => h.id === a.id);
    assert.equal(calls.length, 1, JSON.stringify(hook.bodies));
    assert.equal(calls[0]!.status, 'failed');
    assert.equal((await job(a.id)).status, 'failed');
    // the status names the lost worker's state; a new process of the same name joins the pool again
    addWorker(ra.worker);
    await readyWorkers(2);
  });

  test('a job sent to a worker that is lost before it begins goes back to the queue and runs once, elsewhere', async () => {
    gate.close();
    const frozen = workers.get('gpu-b')!;
    frozen.child.kill('SIGSTOP'); // alive but silent, as a host whose network dropped: it takes nothing from Redis
    try {
      const jobs = [await post('one'), await post('two')];
      const sent = await Promise.all(jobs.map((j) => until(t, j.id, (x) => x.status === 'running')));
      const stranded = sent.find((j) => j.worker === 'gpu-b');
      assert.ok(stranded, `one job went to the frozen worker: ${sent.map((j) => j.worker).join(', ')}`);
      // WORKER_STALL_S later gpu-b counts as lost; the job it never began is queued again, with no worker
      const back = await until(t, stranded.id, (j) => j.status === 'queued', (STALL_S + 5) * 1000);
      assert.equal(back.worker, undefined);
      const done = await drain(jobs.map((j) => j.id));
      for (const j of done) assert.deepEqual([j.status, j.worker], ['done', 'gpu-a'], JSON.stringify(j));
    } finally {
      frozen.child.kill('SIGCONT');
    }
    // the thawed worker finds nothing to run: each job ran exactly once
    await readyWorkers(2);
    await sleep(500);
    for (const id of [...new Set(log.events.filter((e) => e.startsWith('run ')))]) assert.equal(log.events.filter((e) => e === id).length, 1, `${id} ran once`);
  });

  test('DELETE of a job running on a worker reaches that worker: interrupted with the gate still closed', async () => {
    gate.close();
    const a = await post('to cancel');
    const running = await until(t, a.id, (j) => j.status === 'running' && j.stage === '采样');
    assert.ok(running.worker, 'it runs on a named worker');
    assert.deepEqual((await t.http.delete(`/api/jobs/${a.id}`).set(auth)).body, { id: a.id, action: 'interrupted' });
    // the step waiting at the closed gate gives up only when the worker's cancel signal fires
    const ended = await until(t, a.id, (j) => j.status === 'failed', 10_000);
    assert.equal(ended.error, 'interrupted');
    // that worker is free again: a new job runs there (or on the other) and finishes
    const [next] = await drain([(await post('after the cancel')).id]);
    assert.equal(next!.status, 'done');
  });

  test('Redis stopped and restarted while jobs are queued: the API keeps answering, nothing accepted is lost', async () => {
    gate.close();
    const running = [await post('r1'), await post('r2')];
    for (const r of running) await until(t, r.id, (j) => j.status === 'running');
    const before = [await post('q1'), await post('q2')];
    await redis.stop();
    // the API answers, takes new jobs and says Redis is down
    const during = [await post('d1'), await post('d2')];
    const end = Date.now() + 10_000;
    let health: Job = {};
    while (Date.now() < end) {
      health = (await t.http.get('/api/health').set(auth)).body as Job;
      if (health.services?.redis === 'down') break;
      await sleep(50);
    }
    assert.equal(health.services.redis, 'down', JSON.stringify(health.services));
    assert.equal((await job(during[1]!.id)).status, 'queued');
    await sleep(1000);
    await redis.start();
    const jobs = await drain([...running, ...before, ...during].map((j) => j.id));
    for (const j of jobs) assert.equal(j.status, 'done', JSON.stringify(j));
    assert.equal((await t.http.get('/api/health').set(auth)).body.services.redis, 'ok');
  });

  test('the API restarted while workers run: their jobs finish and the new API records them', async () => {
    gate.close();
    const running = [await post('survives 1'), await post('survives 2')];
    const on = new Map<string, string>();
    for (const r of running) on.set(r.id, (await until(t, r.id, (j) => j.status === 'running')).worker);
    const queued = await post('queued across the restart');
    const dataDir = t.dataDir;
    await t.close(false);
    t = await startApp({ dataDir, env: apiEnv, builtinPipelines: false });
    const jobs = await drain([...running, queued].map((j) => j.id));
    for (const j of jobs) assert.equal(j.status, 'done', JSON.stringify(j));
    // recorded as run where they ran before the restart (not run again elsewhere)
    for (const r of running) assert.equal((await job(r.id)).worker, on.get(r.id));
    const png = await t.http.get(`/api/jobs/${running[0]!.id}/image`).set(auth).buffer(true);
    assert.equal(png.status, 200);
  });
});

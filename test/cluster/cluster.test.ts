// Many hosts on demo weights (issue 16's proof, first part): a real redis-server and an S3-compatible server
// (s3rver), one API with QUEUE=redis WORKERS=none STORAGE=s3, and two GPU worker processes of this build that run
// the real Qwen-Image-2.1 pipeline on its demo checkpoint (shared DEMO_WEIGHTS_DIR: generated once, under a lock).
// Six jobs of two profiles spread over both workers, and every png comes back through the API's download and /out
// paths from the object store; DELETE of a done job removes its object. A worker's live previews reach the API's
// event stream and preview endpoint through BullMQ's job progress.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { auth, startApp, until, type TestApp } from '../api/harness';
import { followPreviews } from '../api/follow-previews';
import { pngSize } from '../api/inputs';
import { startRedis, startS3, startWorker, type RedisServer, type S3Server, type WorkerProcess } from './services';

describe('two GPU workers on Redis and S3, demo weights', () => {
  let redis: RedisServer;
  let s3: S3Server;
  let t: TestApp;
  const workers: WorkerProcess[] = [];
  const demo = mkdtempSync(join(tmpdir(), 'kiln-cluster-demo-'));

  before(async () => {
    redis = await startRedis();
    s3 = await startS3();
    const env = { REDIS_URL: redis.url, ...s3.env, WORKER_PROFILES: 'imgmain,imgmain_bf16' };
    for (const name of ['gpu-a', 'gpu-b']) workers.push(startWorker(name, env, { demoWeightsDir: demo }));
    t = await startApp({ env: { QUEUE: 'redis', REDIS_URL: redis.url, WORKERS: 'none', ...s3.env, WORKER_STALL_S: '30' } });
  });
  after(async () => {
    await t?.close(true);
    await Promise.all(workers.map((w) => w.stop()));
    await s3?.stop();
    await redis?.stop();
    rmSync(demo, { recursive: true, force: true });
  });

  test('/api/health lists both workers and Redis', async () => {
    const end = Date.now() + 30_000;
    let body: Record<string, any> = {};
    while (Date.now() < end) {
      body = (await t.http.get('/api/health').set(auth)).body;
      if ((body.workers ?? []).filter((w: any) => w.state === 'ready').length === 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(body.workers.map((w: any) => w.name).sort(), ['gpu-a', 'gpu-b'], JSON.stringify(body));
    for (const w of body.workers) {
      assert.equal(w.state, 'ready');
      assert.deepEqual([...w.profiles].sort(), ['image/imgmain', 'image/imgmain_bf16']);
      assert.ok(w.heartbeat_age_s >= 0 && w.heartbeat_age_s < 5, `heartbeat_age_s ${w.heartbeat_age_s}`);
      assert.equal(w.mode, 'redis');
    }
    assert.equal(body.services.redis, 'ok', JSON.stringify(body.services));
    assert.equal(body.ok, true);
  });

  test('6 jobs of two profiles run on both workers; every png downloads through the API (download and /out)', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const profile = i % 2 ? 'imgmain_bf16' : 'imgmain';
      const res = await t.http.post('/api/v1/image').set(auth).send({ prompt: `kiln ${i}`, profile, size: '256x256', steps: 2, seed: i });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      ids.push(res.body.id);
    }
    const jobs = [];
    for (const id of ids) jobs.push(await until(t, id, (j) => j.status === 'done' || j.status === 'failed', 240_000));
    for (const j of jobs) assert.equal(j.status, 'done', JSON.stringify(j));
    const used = new Set(jobs.map((j) => j.worker));
    assert.deepEqual([...used].sort(), ['gpu-a', 'gpu-b'], `both workers ran jobs: ${jobs.map((j) => `${j.id}@${j.worker}`).join(' ')}`);
    for (const j of jobs) {
      const dl = await t.http.get(`/api/jobs/${j.id}/image`).set(auth).buffer(true);
      assert.equal(dl.status, 200);
      assert.ok(Buffer.isBuffer(dl.body), `a body of bytes: ${JSON.stringify(dl.headers)} ${JSON.stringify(dl.body).slice(0, 200)}`);
      assert.deepEqual(pngSize(dl.body), { width: 256, height: 256 });
      const served = await t.http.get(j.image).buffer(true);
      assert.equal(served.status, 200, j.image);
      assert.ok(served.body.equals(dl.body), `${j.image} is the same file`);
    }
    // a byte range, as express.static answers it locally (a browser seeking in an mp4)
    const whole = (await t.http.get(jobs[1]!.image).buffer(true)).body as Buffer;
    const a = Math.floor(Math.random() * (whole.length - 100)), b = a + Math.floor(Math.random() * 99);
    const part = await t.http.get(jobs[1]!.image).set('Range', `bytes=${a}-${b}`).buffer(true);
    assert.equal(part.status, 206);
    assert.equal(part.headers['content-range'], `bytes ${a}-${b}/${whole.length}`);
    assert.ok((part.body as Buffer).equals(whole.subarray(a, b + 1)), 'the span, byte for byte');
    const past = await t.http.get(jobs[1]!.image).set('Range', `bytes=${whole.length + 10}-`);
    assert.deepEqual([past.status, past.headers['content-range']], [416, `bytes */${whole.length}`]);
    // outputs live in the bucket under jobs/<id>/, not in the API's DATA_DIR
    const listed = await objects();
    for (const j of jobs) assert.ok(listed.some((k) => k.startsWith(`jobs/${j.id}/`)), `an object under jobs/${j.id}/: ${listed.join(' ')}`);

    // DELETE removes the job's objects
    const gone = jobs[0]!.id;
    assert.equal((await t.http.delete(`/api/jobs/${gone}`).set(auth)).status, 200);
    assert.ok(!(await objects()).some((k) => k.startsWith(`jobs/${gone}/`)), 'the deleted job has no objects left');
    assert.equal((await t.http.get(jobs[0]!.image)).status, 404);
  });

  test('a job on a Redis worker sends live previews: preview events with a URL, each fetched while it runs a webp', async () => {
    // 30 steps: previews at 5, 10, 15, 20, 25, each with many steps still to run when it is fetched
    const res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'kiln previews', profile: 'imgmain', size: '256x256', steps: 30, seed: 9 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const { events, previews, fetched } = await followPreviews(t, res.body.id);
    assert.equal(events.at(-1)!.event, 'done', JSON.stringify(events.at(-1)));
    assert.deepEqual(previews.map((p) => [p.step, p.max, p.width, p.height, p.url]), [5, 10, 15, 20, 25].map((s) => [s, 30, 256, 256, `/api/jobs/${res.body.id}/preview`]));
    const ok = fetched.filter((f) => f.status === 200);
    assert.ok(ok.length >= 1, `at least one preview fetched while the job ran: ${JSON.stringify(fetched)}`);
    for (const f of ok) assert.deepEqual([f.type, f.width, f.height], ['image/webp', 256, 256], JSON.stringify(f));
  });

  async function objects(): Promise<string[]> {
    const c = new S3Client({ endpoint: s3.env.S3_ENDPOINT, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } });
    const r = await c.send(new ListObjectsV2Command({ Bucket: 'kiln' }));
    c.destroy();
    return (r.Contents ?? []).map((o) => o.Key!);
  }
});

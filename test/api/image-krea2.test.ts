// imgart_turbo / imgart_turbo_int8 through the real app with the real Krea 2 registration (no test pipeline): with no
// weights in WEIGHTS_DIR the service generates the demo Krea 2 Turbo checkpoint at the first job and runs the whole
// model on the engine (lavapipe here). /api/config says demo with 8 default steps; a job without steps runs 8 and
// says so; the png has the asked size; the same seed gives the same bytes; 1 to 3 style references (mode t2i,
// image_count) change the picture deterministically; size_from_ref is refused naming the profiles that edit.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { auth, startApp, startAppOnDemoWeights, TestApp, until } from './harness';
import { dataUri, pngBytes, pngSize } from './inputs';
import { testPipeline } from './test-pipelines';

describe('image jobs with the real Krea 2 Turbo pipeline (demo weights)', () => {
  let t: TestApp;
  before(async () => {
    t = await startAppOnDemoWeights();
  });
  after(async () => {
    await t.close(true);
  });
  const image = async (id: string) => {
    const res = await t.http.get(`/api/jobs/${id}/image`).set(auth).buffer(true);
    assert.equal(res.status, 200);
    return res.body as Buffer;
  };
  const job = async (body: object) => {
    const r = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a lighthouse at dusk, oil painting', wait: true, timeout: 600, ...body });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.status, 'done', JSON.stringify(r.body));
    return r.body;
  };

  test('/api/config: both profiles available on demo weights, 8 default steps, cfg 1, t2i only', async () => {
    const cfg = (await t.http.get('/api/config').set(auth)).body;
    for (const name of ['imgart_turbo', 'imgart_turbo_int8']) {
      const p = cfg.profiles.find((x: { profile: string }) => x.profile === name);
      assert.deepEqual([p.available, p.weights, p.default_steps, p.modes, p.max_images], [true, 'demo', 8, ['t2i'], 3], name);
      assert.match(p.note, /^demo: a tiny random Krea 2 Turbo checkpoint .*npm run weights -- pull imgart_turbo/);
    }
  });

  test('a job without steps runs 8 and shows it; a png of the asked size; same seed same bytes, another seed others', async () => {
    const started = Date.now();
    const first = await job({ profile: 'imgart_turbo', size: '256x256', seed: 7 });
    console.log(`# first imgart_turbo job (demo generation, load, 8 steps at 256x256): ${Date.now() - started} ms, exec_s ${first.exec_s}`);
    assert.deepEqual([first.steps, first.mode, first.image_count, first.cfg], [8, 't2i', 0, 1]);
    const a = await image(first.id);
    assert.deepEqual(pngSize(a), { width: 256, height: 256 });
    const again = await job({ profile: 'imgart_turbo', size: '256x256', seed: 7 });
    assert.ok((await image(again.id)).equals(a), 'same parameters and seed, same bytes');
    const other = await job({ profile: 'imgart_turbo', size: '256x256', seed: 8 });
    assert.ok(!(await image(other.id)).equals(a), 'another seed, another picture');
  });

  test('imgart_turbo_int8 runs the same checkpoint with int8 DiT linears (a profile switch reloads)', async () => {
    const r = await job({ profile: 'imgart_turbo_int8', size: '320x256', steps: 2, seed: 7 });
    assert.deepEqual([r.steps, r.mode], [2, 't2i']);
    assert.deepEqual(pngSize(await image(r.id)), { width: 320, height: 256 });
    // the worker kept the quantised linears in the int8 cache the API's KILN_CACHE_DIR names (engine/int8-cache.ts)
    const cached = readdirSync(join(t.dataDir, 'kiln-cache', 'int8')).filter((f) => f.endsWith('.safetensors'));
    assert.ok(cached.length > 10, `int8 cache entries: ${cached.length}`);
  });

  test('style references: mode t2i, image_count counts them, deterministic, and they change the picture', async () => {
    const body = { profile: 'imgart_turbo', size: '256x256', steps: 2, seed: 3 };
    const plain = await image((await job(body)).id);
    const ref1 = dataUri('image/png', await pngBytes(96, 64));
    const one = await job({ ...body, images: [ref1] });
    assert.deepEqual([one.mode, one.image_count], ['t2i', 1]);
    const a = await image(one.id);
    assert.deepEqual(pngSize(a), { width: 256, height: 256 });
    assert.ok(!a.equals(plain), 'a style reference changes the picture');
    assert.ok((await image((await job({ ...body, images: [ref1] })).id)).equals(a), 'the same reference, the same bytes');
    // multipart, three references
    const r = await t.http.post('/api/images').set(auth).field('prompt', 'a lighthouse at dusk, oil painting').field('profile', 'imgart_turbo')
      .field('size', '256x256').field('steps', '2').field('seed', '3')
      .attach('images', await pngBytes(96, 64), 'a.png').attach('images', await pngBytes(40, 120), 'b.png').attach('images', await pngBytes(300, 300), 'c.png');
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual([r.body.mode, r.body.image_count], ['t2i', 3]);
    const done = await until(t, r.body.id, (j) => j.status !== 'queued' && j.status !== 'running', 300_000);
    assert.equal(done.status, 'done', JSON.stringify(done));
    assert.ok(!(await image(r.body.id)).equals(a));
  });

  test('size_from_ref is refused at creation, naming the profiles that edit', async () => {
    const res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', profile: 'imgart_turbo', size_from_ref: true, images: [dataUri('image/png', await pngBytes())] });
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /^size_from_ref is for editing; imgart_turbo cannot edit \(its images are style references\): imgmain and imgmain_bf16 edit$/);
  });
});

test('a worker that does not serve imgart_turbo still refuses it at creation as not built', async () => {
  const t = await startApp({ builtinPipelines: false, pipelines: [testPipeline('image', 'imgmain', { stepMs: 1 })] });
  try {
    const res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', profile: 'imgart_turbo' });
    assert.equal(res.status, 400);
    assert.equal(res.body.detail, 'profile imgart_turbo: the Krea 2 Turbo model is not built into this service yet, so it cannot run image jobs');
    const art = (await t.http.get('/api/config').set(auth)).body.profiles.find((p: { profile: string }) => p.profile === 'imgart_turbo');
    assert.deepEqual([art.available, art.weights], [false, 'missing']);
  } finally {
    await t.close(true);
  }
});

// Image jobs through the real app with the real imgmain / imgmain_bf16 registration (no test pipeline): with no
// checkpoint in WEIGHTS_DIR the service puts the trained demo Qwen-Image-2.1 checkpoint in place at the first job and runs the
// whole model on the engine (lavapipe here). /api/config says demo; POST /api/v1/image and /api/images give a real
// png of the asked size; the same parameters and seed give the same bytes and another seed others; DELETE interrupts
// a running job between steps; an editing job with an uploaded reference gives its png too.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { auth, startAppOnDemoWeights, TestApp, until } from './harness';
import { pngBytes, pngSize } from './inputs';

describe('image jobs with the real Qwen-Image-2.1 pipeline (demo weights)', () => {
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

  test('/api/config: imgmain and imgmain_bf16 are available on demo weights', async () => {
    const cfg = (await t.http.get('/api/config').set(auth)).body;
    for (const name of ['imgmain', 'imgmain_bf16']) {
      const p = cfg.profiles.find((x: { profile: string }) => x.profile === name);
      assert.deepEqual([p.available, p.weights], [true, 'demo'], name);
      assert.match(p.note, /^demo: a tiny Qwen-Image-2.1 checkpoint trained on procedural pictures .*npm run weights -- pull imgmain/);
    }
  });

  test('JSON with wait: a 256x256 png; the same seed gives the same bytes, another seed others (multipart too)', async () => {
    let started = Date.now();
    const first = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a red kiln at dusk', size: '256x256', steps: 2, seed: 7, wait: true });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(first.body.status, 'done', JSON.stringify(first.body));
    console.log(`# first job (demo generation, load, 2 steps at 256x256): ${Date.now() - started} ms, exec_s ${first.body.exec_s}`);
    const a = await image(first.body.id);
    assert.deepEqual(pngSize(a), { width: 256, height: 256 });
    const served = await t.http.get(first.body.image).buffer(true);
    assert.ok(served.body.equals(a), '/out/<id>.png is the same file');

    started = Date.now();
    const again = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a red kiln at dusk', size: '256x256', steps: 2, seed: 7, wait: true });
    const ms = Date.now() - started;
    assert.equal(again.body.status, 'done');
    console.log(`# a 256x256 2-step job with the model loaded: ${ms} ms, exec_s ${again.body.exec_s}`);
    assert.ok(again.body.exec_s < 60, `exec_s ${again.body.exec_s}`);
    assert.ok((await image(again.body.id)).equals(a), 'same parameters and seed, same bytes');

    const other = await t.http.post('/api/images').set(auth).field('prompt', 'a red kiln at dusk').field('size', '256x256').field('steps', '2').field('seed', '8');
    assert.equal(other.status, 200, JSON.stringify(other.body));
    const done = await until(t, other.body.id, (j) => j.status !== 'queued' && j.status !== 'running', 120_000);
    assert.equal(done.status, 'done', JSON.stringify(done));
    const b = await image(other.body.id);
    assert.deepEqual(pngSize(b), { width: 256, height: 256 });
    assert.ok(!b.equals(a), 'another seed, another picture');
  });

  test('imgmain_bf16 runs the same checkpoint at 16 bits (a profile switch reloads)', async () => {
    const r = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a red kiln at dusk', profile: 'imgmain_bf16', size: '320x256', steps: 2, seed: 7, wait: true });
    assert.equal(r.body.status, 'done', JSON.stringify(r.body));
    assert.deepEqual(pngSize(await image(r.body.id)), { width: 320, height: 256 });
  });

  test('DELETE of a running job interrupts it between steps; no png', async () => {
    const r = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a long one', profile: 'imgmain_bf16', size: '256x256', steps: 50, seed: 1 });
    const running = await until(t, r.body.id, (j) => j.status === 'running' && j.stage === '采样' && j.progress.value >= 1, 120_000);
    assert.equal(running.progress.max, 50);
    assert.deepEqual((await t.http.delete(`/api/jobs/${r.body.id}`).set(auth)).body, { id: r.body.id, action: 'interrupted' });
    const failed = await until(t, r.body.id, (j) => j.status === 'failed', 60_000);
    assert.equal(failed.error, 'interrupted');
    assert.equal(existsSync(join(t.dataDir, 'out', `${r.body.id}.png`)), false);
  });

  test('an editing job: one reference (multipart upload) gives a png of the asked size', async () => {
    const r = await t.http.post('/api/images').set(auth).field('prompt', 'make Picture 1 blue').field('size', '256x256').field('steps', '2').field('seed', '7')
      .attach('images', await pngBytes(96, 64), 'ref.png');
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual([r.body.mode, r.body.image_count], ['edit', 1]);
    const done = await until(t, r.body.id, (j) => j.status !== 'queued' && j.status !== 'running', 120_000);
    assert.equal(done.status, 'done', JSON.stringify(done));
    assert.deepEqual(pngSize(await image(r.body.id)), { width: 256, height: 256 });
  });
});

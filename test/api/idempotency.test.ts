// Idempotent creates (issue 14): an Idempotency-Key on the create endpoints, JSON and multipart. The same key with
// the same request returns the same job (200, the same id, no second job); with another request it is a 409 that
// says so; a request that failed (400) frees its key; the keys are kept in the store (a restart keeps them).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { auth, startApp, TestApp } from './harness';
import { pngBytes } from './inputs';
import { testPipeline } from './test-pipelines';

const count = async (t: TestApp) => Number((await t.http.get('/api/jobs').set(auth)).headers['x-total-count']);

describe('Idempotency-Key', () => {
  let t: TestApp;
  before(async () => (t = await startApp({ builtinPipelines: false, pipelines: [testPipeline('image', 'imgmain'), testPipeline('video', 'fastvid')] })));
  after(() => t.close(true));

  test('JSON: the same key and body give the same job, whatever the field order; another body is a 409', async () => {
    const key = { 'Idempotency-Key': 'order-7f3a' };
    const a = await t.http.post('/api/v1/image').set(auth).set(key).send({ prompt: 'a fox', steps: 2, seed: 4 });
    assert.equal(a.status, 200);
    const before = await count(t);
    const b = await t.http.post('/api/v1/image').set(auth).set(key).send({ seed: 4, steps: 2, prompt: 'a fox' });
    assert.deepEqual([b.status, b.body.id], [200, a.body.id]);
    assert.equal(await count(t), before, 'no second job');
    const c = await t.http.post('/api/v1/image').set(auth).set(key).send({ prompt: 'a wolf', steps: 2, seed: 4 });
    assert.equal(c.status, 409);
    assert.match(c.body.detail, /^Idempotency-Key "order-7f3a" was used at \d{4}-\d\d-\d\dT.* for a different request; send this one with a new key$/);
    const d = await t.http.post('/api/v1/generate').set(auth).set(key).send({ prompt: 'a fox', steps: 2, seed: 4 });
    assert.equal(d.status, 409, 'another endpoint is another request');
    assert.equal((await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a fox', steps: 2, seed: 4 })).body.id === a.body.id, false, 'without a key, a new job');
  });

  test('multipart: fields and files make the fingerprint', async () => {
    const key = { 'Idempotency-Key': 'form-1' };
    const png = await pngBytes(40, 30);
    const send = (file: Buffer) => t.http.post('/api/images').set(auth).set(key).field('prompt', 'edit it').field('steps', '2').attach('images', file, 'a.png');
    const a = await send(png);
    assert.equal(a.status, 200, JSON.stringify(a.body));
    const b = await send(png);
    assert.deepEqual([b.status, b.body.id], [200, a.body.id]);
    assert.equal((await send(await pngBytes(41, 30))).status, 409, 'another file, another request');
  });

  test('a refused request frees its key; a key that is not visible ASCII is a 400', async () => {
    const key = { 'Idempotency-Key': 'retry-after-fix' };
    const bad = await t.http.post('/api/v1/image').set(auth).set(key).send({ prompt: 'x', steps: 2, aspect: '7:1' });
    assert.equal(bad.status, 400);
    const wrongType = await t.http.post('/api/v1/image').set(auth).set(key).send({ prompt: 'x', steps: 'two' });
    assert.equal(wrongType.status, 422);
    const fixed = await t.http.post('/api/v1/image').set(auth).set(key).send({ prompt: 'x', steps: 2 });
    assert.equal(fixed.status, 200, 'the key was not held by the refused requests');
    const res = await t.http.post('/api/v1/image').set(auth).set({ 'Idempotency-Key': 'has space' }).send({ prompt: 'x' });
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /^Idempotency-Key must be 1 to 255 visible ASCII characters/);
  });
});

test('Idempotency-Key records survive a restart', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-idem-'));
  try {
    const first = await startApp({ dataDir: dir, env: { WORKERS: 'none' } });
    const a = await first.http.post('/api/v1/image').set(auth).set({ 'Idempotency-Key': 'k1' }).send({ prompt: 'x' });
    await first.close();
    const second = await startApp({ dataDir: dir, env: { WORKERS: 'none' } });
    const b = await second.http.post('/api/v1/image').set(auth).set({ 'Idempotency-Key': 'k1' }).send({ prompt: 'x' });
    assert.deepEqual([b.status, b.body.id], [200, a.body.id]);
    await second.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

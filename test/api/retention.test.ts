// Retention (issue 14): with OUTPUT_TTL_S finished jobs carry expires_at; a sweep deletes their record, file and
// events once it passes and says so in the log; the job, its download and its /out file then answer 404 with the
// reason. Jobs not finished are never touched, and without OUTPUT_TTL_S nothing expires.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { makeGate } from './control';
import { auth, startApp, until } from './harness';
import { testPipeline } from './test-pipelines';

test('OUTPUT_TTL_S: expires_at on finished jobs, then record, file and events gone with a reason; unfinished jobs kept', { timeout: 30_000 }, async () => {
  const gate = makeGate(true);
  const t = await startApp({ builtinPipelines: false, env: { OUTPUT_TTL_S: '2' }, pipelines: [testPipeline('image', 'imgmain', { gate })] });
  try {
    const done = (await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', steps: 1, wait: true })).body;
    assert.equal(done.status, 'done');
    assert.ok(Math.abs(done.expires_at - (done.finished + 2)) < 0.01, JSON.stringify(done));
    gate.close();
    const held = (await t.http.post('/api/v1/image').set(auth).send({ prompt: 'held', steps: 1 })).body;
    await until(t, held.id, (j) => j.status === 'running');
    assert.equal((await t.http.get(`/api/jobs/${held.id}`).set(auth)).body.expires_at, undefined, 'only finished jobs expire');
    assert.ok(existsSync(join(t.dataDir, 'out', `${done.id}.png`)));
    const end = Date.now() + 8000;
    let res = await t.http.get(`/api/jobs/${done.id}`).set(auth);
    while (res.status === 200 && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 200));
      res = await t.http.get(`/api/jobs/${done.id}`).set(auth);
    }
    assert.equal(res.status, 404);
    assert.match(res.body.detail, new RegExp(`^job ${done.id} expired at \\d{4}-.*Z and was deleted \\(OUTPUT_TTL_S=2\\)$`));
    const dl = await t.http.get(`/api/jobs/${done.id}/image`).set(auth);
    assert.equal(dl.status, 404);
    assert.match(dl.body.detail, /expired at .* and was deleted/);
    const out = await t.http.get(`/out/${done.id}.png`);
    assert.equal(out.status, 404);
    assert.match(out.body.detail, new RegExp(`^${done.id}\\.png expired at`));
    assert.equal(existsSync(join(t.dataDir, 'out', `${done.id}.png`)), false, 'the file is gone');
    assert.equal((await t.http.get('/api/jobs').set(auth)).body.some((j: any) => j.id === done.id), false, 'no longer listed');
    assert.equal((await t.http.get(`/api/jobs/${held.id}`).set(auth)).body.status, 'running', 'the running job is untouched');
    gate.openAll();
  } finally {
    gate.openAll();
    await t.close(true);
  }
});

test('without OUTPUT_TTL_S nothing expires and finished jobs have no expires_at', async () => {
  const t = await startApp({ builtinPipelines: false, pipelines: [testPipeline('image', 'imgmain')] });
  try {
    const done = (await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', steps: 1, wait: true })).body;
    assert.deepEqual([done.status, done.expires_at], ['done', undefined]);
  } finally {
    await t.close(true);
  }
});

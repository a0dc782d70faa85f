// A job that cannot fit the GPU is refused at creation (issue 42, README "Smaller GPUs"): where the worker serves a
// profile on its real weights, the create path plans the job (the planner's child, as dry_run does) and a peak over
// GPU_MEMORY_BUDGET is a 400 naming the need, the budget and what to change, with nothing queued. The real weights here
// are the planned Qwen-Image-2.1 release (src/plan/layouts.ts: every header real, the files sparse at their real
// lengths) in WEIGHTS_DIR's own layout, which the weights check takes for a complete checkpoint; no job of it runs.
// Profiles on their demo checkpoints are not checked (every demo job fits): imgart_turbo's job is queued as before.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { plannedQwenImage21Root } from '../../src/plan/layouts';
import { auth, startApp, type TestApp } from './harness';

describe('a job that cannot fit the GPU budget is refused at creation', () => {
  let t: TestApp;
  let weights: string;
  before(async () => {
    weights = mkdtempSync(join(tmpdir(), 'kiln-fit-weights-'));
    symlinkSync(await plannedQwenImage21Root(), join(weights, 'Qwen-Image-2.1'));
    t = await startApp({ env: { WEIGHTS_DIR: weights, GPU_MEMORY_BUDGET: '2GiB' } });
    // the worker's word on the profile: real weights (a job created before it says so is not checked, as checkServed)
    for (let i = 0; i < 200 && t.scheduler.served('image', 'imgmain')?.weights !== 'real'; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(t.scheduler.served('image', 'imgmain')?.weights, 'real');
  });
  after(async () => {
    await t.close(true);
    rmSync(weights, { recursive: true, force: true });
  });

  const jobs = async () => ((await t.http.get('/api/jobs').set(auth)).body as { id: string }[]).map((j) => j.id);

  test('JSON and multipart creates: a 400 with the plan\'s need and the budget; nothing queued; dry_run shows the same plan', { timeout: 240_000 }, async () => {
    const before = await jobs();
    const body = { prompt: 'a blue bowl on a wooden table', profile: 'imgmain', res: '1K' };
    const res = await t.http.post('/api/v1/image').set(auth).send(body);
    assert.equal(res.status, 400, JSON.stringify(res.body));
    const m = /^this image job does not fit the GPU: by its plan it needs ([\d.]+) GiB of GPU memory with blocks-streamed and text-encoder-streamed and text-encoder-rest-offloaded offload \(stage [^)]+\), over the 2\.00 GiB budget \(GPU_MEMORY_BUDGET, else the GPU's memory less 5 %\); a smaller res or size needs less \(dry_run: true shows the plan\)$/.exec(res.body.detail);
    assert.ok(m, res.body.detail);
    // the same shape with another prompt and seed, through the multipart form: refused the same way
    const form = await t.http.post('/api/images').set(auth).field('prompt', 'a green jug').field('profile', 'imgmain').field('res', '1K').field('seed', '9');
    assert.equal(form.status, 400, JSON.stringify(form.body));
    assert.match(form.body.detail, /does not fit the GPU: by its plan it needs [\d.]+ GiB/);
    assert.deepEqual(await jobs(), before, 'nothing queued or stored');
    // dry_run answers the plan the refusal read
    const dry = await t.http.post('/api/v1/image').set(auth).send({ ...body, dry_run: true });
    assert.equal(dry.status, 200, JSON.stringify(dry.body));
    assert.equal(dry.body.fits, false);
    assert.equal(dry.body.budget_bytes, 2 * 2 ** 30);
    assert.equal((dry.body.peak_gpu_bytes / 2 ** 30).toFixed(2), m![1]);
    assert.match(dry.body.offload.note, /it does not fit even so: .*a smaller res or size needs less/);
  });

  test('a profile on its demo checkpoint is not held to the released model\'s plan: queued and run as before', { timeout: 240_000 }, async () => {
    const res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a kite', profile: 'imgart_turbo', size: '256x256', wait: true });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.status, 'done');
  });
});

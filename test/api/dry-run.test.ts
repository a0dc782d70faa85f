// "dry_run": true on the JSON creates (issue 42; README "Dry runs"): the job's plan, computed in the planner's child
// process, after the same checks a create makes (the same 400s); nothing queued or stored; without dry_run (or with
// false) a create is what it always was. The server's traffic is checked against /openapi.json when it closes.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { auth, startAppOnDemoWeights, TestApp } from './harness';
import { dataUri, wavBytes } from './inputs';
import { Planner } from '../../src/plan/planner';

const GiB = 2 ** 30;

describe('dry_run: a job\'s plan through the API', () => {
  let t: TestApp;
  before(async () => (t = await startAppOnDemoWeights({ env: { GPU_MEMORY_BUDGET: '16GiB' } })));
  after(() => t.close(true));

  const post = (path: string, body: object, headers: Record<string, string> = {}) => t.http.post(path).set(auth).set(headers).send(body);
  const jobs = async () => (await t.http.get('/api/jobs').set(auth)).body as unknown[];

  function assertPlan(p: Record<string, any>, kind: string, profile: string): void {
    assert.equal(p.dry_run, true);
    assert.equal(p.kind, kind);
    assert.equal(p.profile, profile);
    assert.ok(p.peak_gpu_bytes > 0, 'a peak');
    assert.ok(p.flops > 0 && p.dispatches > 0, 'work');
    assert.ok(p.stages.length >= 3);
    for (const s of p.stages) assert.ok(typeof s.stage === 'string' && s.peak_gpu_bytes >= 0 && s.peak_gpu_bytes <= p.peak_gpu_bytes);
    assert.ok(p.stages.some((s: any) => s.stage === '采样' && s.steps > 0));
    // GPU_MEMORY_BUDGET is the budget a plan is checked against
    assert.equal(p.budget_bytes, 16 * GiB);
    assert.equal(p.fits, p.peak_gpu_bytes <= 16 * GiB);
    // the test server's GPU probe reports no adapter: the plan says which profile it assumed
    assert.equal(p.adapter.id, 'h200');
    assert.match(p.notes.join('\n'), /adapter profile assumed: NVIDIA H200/);
    assert.equal(p.id, undefined, 'no job id');
  }

  test('an image: the plan, nothing queued; the same request again is answered from the kept plans', { timeout: 120_000 }, async () => {
    const before = await jobs();
    const body = { prompt: 'a red kite', profile: 'imgmain', size: '256x256', steps: 2, seed: 7, dry_run: true };
    const res = await post('/api/v1/image', body);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assertPlan(res.body, 'image', 'imgmain');
    assert.deepEqual({ width: res.body.job.width, height: res.body.job.height, steps: res.body.job.steps }, { width: 256, height: 256, steps: 2 });
    // the seed does not change a plan: kept, answered at once
    const started = Date.now();
    const again = await post('/api/v1/image', { ...body, seed: 8 });
    assert.equal(again.status, 200);
    assert.ok(Date.now() - started < 2000, `answered from the kept plans (${Date.now() - started} ms)`);
    assert.deepEqual(again.body, res.body);
    assert.deepEqual(await jobs(), before, 'nothing queued or stored');
  });

  test('a video: the plan of its drafted size and frames; nothing queued', { timeout: 180_000 }, async () => {
    const before = await jobs();
    const res = await post('/api/v1/generate', { prompt: 'a kite over the sea', profile: 'fastvid', res: '352p', seconds: 1, dry_run: true });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assertPlan(res.body, 'video', 'fastvid');
    assert.equal(res.body.job.height, 352);
    assert.ok(res.body.job.frames > 0);
    assert.ok(res.body.per_step.flops > 0);
    assert.deepEqual(await jobs(), before, 'nothing queued or stored');
  });

  test('speech: the plan of POST /api/v1/tts with its clip counted by length; a bad request is the same 400', { timeout: 120_000 }, async () => {
    const clip = dataUri('audio/wav', wavBytes(4));
    const res = await post('/api/v1/tts', { text: 'The kiln was still warm.', ref_audio: clip, dry_run: true });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.dry_run, true);
    assert.equal(res.body.kind, 'tts');
    assert.ok(res.body.peak_gpu_bytes > 0 && res.body.flops > 0 && res.body.dispatches > 0 && res.body.stages.length > 0);
    assert.equal(Math.round(res.body.job.ref_seconds), 4);
    assert.equal(res.body.audio, undefined, 'nothing spoken');
    for (const body of [{ text: 'hi', ref_audio: clip, language: 'Klingon' }, { text: ' ', ref_audio: clip }, { text: 'hi', ref_audio: dataUri('audio/wav', wavBytes(1)) }]) {
      const plain = await post('/api/v1/tts', body);
      const dry = await post('/api/v1/tts', { ...body, dry_run: true });
      assert.equal(plain.status, 400, JSON.stringify(plain.body));
      assert.deepEqual([dry.status, dry.body], [plain.status, plain.body]);
    }
  });

  test('a client that goes away stops its plan: the planner is free for the next at once', { timeout: 120_000 }, async () => {
    const ac = new AbortController();
    const gone = fetch(`${t.url}/api/v1/generate`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ prompt: 'a long walk', profile: 'fastvid', res: '480p', seconds: 5, dry_run: true }), signal: ac.signal });
    await new Promise((r) => setTimeout(r, 500));
    ac.abort();
    await assert.rejects(gone);
    // its child process is killed and its slot freed
    const planner = t.app.get(Planner) as unknown as { children: Set<unknown>; running: number };
    for (let i = 0; i < 100 && (planner.children.size > 0 || planner.running > 0); i++) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual([planner.children.size, planner.running], [0, 0]);
    // a plan of its own (not kept yet) runs now
    const started = Date.now();
    const res = await post('/api/v1/image', { prompt: 'a small fox', profile: 'imgmain', size: '256x256', steps: 3, dry_run: true });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.job.steps, 3);
    assert.ok(Date.now() - started < 30_000, `${Date.now() - started} ms`);
  });

  test('a request a create refuses is the same 400 with dry_run', async () => {
    const cases: [string, object][] = [
      ['/api/v1/generate', { prompt: 'x', res: '1080p' }],
      ['/api/v1/generate', { prompt: '' }],
      ['/api/v1/generate', { prompt: 'x', seconds: 99 }],
      ['/api/v1/image', { prompt: 'x', size: '100x100' }],
      ['/api/v1/image', { prompt: 'x', profile: 'nope' }],
      ['/api/v1/image', { prompt: 'x', images: [dataUri('image/png', Buffer.from('not a png'))] }],
      ['/api/v1/image', { prompt: 'x', callback_url: 'ftp://example.com/x' }],
    ];
    for (const [path, body] of cases) {
      const plain = await post(path, body);
      const dry = await post(path, { ...body, dry_run: true });
      assert.equal(plain.status, 400, `${path} ${JSON.stringify(body)}: ${JSON.stringify(plain.body)}`);
      assert.equal(dry.status, plain.status, `${path} ${JSON.stringify(body)}`);
      assert.deepEqual(dry.body, plain.body);
    }
    // a type error is the same 422, dry_run's own included
    assert.equal((await post('/api/v1/image', { prompt: 'x', dry_run: 'yes' })).status, 422);
    assert.deepEqual(await jobs(), []);
  });

  test('dry_run false or absent creates the job as before; an Idempotency-Key is not claimed by a dry run', { timeout: 60_000 }, async () => {
    const key = { 'Idempotency-Key': 'dry-run-key-1' };
    const dry = await post('/api/v1/image', { prompt: 'a red kite', profile: 'imgmain', size: '256x256', steps: 2, dry_run: true }, key);
    assert.equal(dry.status, 200);
    assert.equal(dry.body.dry_run, true);
    const made = await post('/api/v1/image', { prompt: 'a red kite', profile: 'imgmain', size: '256x256', steps: 2, dry_run: false }, key);
    assert.equal(made.status, 200, JSON.stringify(made.body));
    assert.match(made.body.id, /^\d{8}_\d{6}_\d+$/);
    assert.equal(made.body.dry_run, undefined);
    assert.ok(['queued', 'running', 'done'].includes(made.body.status));
    const listed = (await jobs()) as { id: string }[];
    assert.deepEqual(listed.map((j) => j.id), [made.body.id]);
    await t.http.delete(`/api/jobs/${made.body.id}`).set(auth);
  });
});

// Live previews (issue 46) through the real app on the demo checkpoints: while an image job samples (imgmain:
// Qwen-Image-2.1; imgart_turbo: Krea 2) or a video job (fastvid: MiniMax H3, an animated webp of 3 frames), its event stream announces `preview` events every few steps with a URL, and
// GET /api/jobs/{id}/preview answers the latest as a webp whose aspect is the output's (X-Preview-Step: its step);
// 404 for an unknown job and once the job has ended.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { followPreviews } from './follow-previews';
import { auth, startAppOnDemoWeights, TestApp } from './harness';
import { videoLatentFrames } from '../../src/models/minimax_h3/sequence/packed-sequence';

describe('live previews while image and video jobs sample (demo weights)', () => {
  let t: TestApp;
  before(async () => (t = await startAppOnDemoWeights()));
  after(() => t.close(true));

  for (const [profile, steps] of [['imgmain', 10], ['imgart_turbo', 8]] as const) {
    test(`${profile}: preview events with a URL, each a decodable webp of the output's 3:2 aspect; 404 after the end`, async () => {
      const res = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a red circle on a blue background', profile, size: '384x256', steps, seed: 9 });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const id = res.body.id as string;
      const { events, previews, fetched: got } = await followPreviews(t, id);
      const end = events.at(-1)!;
      assert.equal(end.event, 'done', JSON.stringify(end));
      // about five, evenly spread, never the last step (the output follows it)
      const expected = steps === 10 ? [2, 4, 6, 8] : [2, 4, 6];
      assert.deepEqual(previews.map((p) => p.step), expected, JSON.stringify(previews));
      for (const p of previews) assert.deepEqual([p.id, p.max, p.url, p.width, p.height], [id, steps, `/api/jobs/${id}/preview`, 256, 171]);
      const ok = got.filter((g) => g.status === 200);
      assert.ok(ok.length >= 1, `at least one preview fetched while the job ran: ${JSON.stringify(got)}`);
      for (const g of ok) {
        assert.deepEqual([g.type, g.width, g.height], ['image/webp', 256, 171], JSON.stringify(g));
        assert.ok(expected.includes(Number(g.step)), JSON.stringify(g));
      }
      console.log(`# ${profile} 384x256 ${steps} steps: previews at ${previews.map((p) => p.step).join(', ')}; fetched ${got.map((g) => g.status).join(' ')}`);
      const gone = await t.http.get(`/api/jobs/${id}/preview`).set(auth);
      assert.equal(gone.status, 404);
      assert.match(gone.body.detail, /has no preview now: previews are shown while a job samples; this one is done$/);
    });
  }

  test('fastvid (MiniMax H3): preview events at steps 2, 4, 6 of 8, each a webp of the first, middle and last latent frames at the 608x352 output\'s aspect', async () => {
    const res = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'a red ball moving right', seconds: 1, res: '352p', steps: 8, seed: 4 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const id = res.body.id as string;
    const { events, previews, fetched } = await followPreviews(t, id);
    assert.equal(events.at(-1)!.event, 'done', JSON.stringify(events.at(-1)));
    assert.deepEqual(previews.map((p) => [p.step, p.max, p.width, p.height]), [[2, 8, 256, 148], [4, 8, 256, 148], [6, 8, 256, 148]]);
    const ok = fetched.filter((g) => g.status === 200);
    assert.ok(ok.length >= 1, 'at least one preview fetched while the job ran');
    // the first, middle and last latent frames as an animated webp (test/unit/latent-preview checks the frames; the
    // random demo's damped VAE paints them all the same flat colour, and webp keeps identical frames once)
    const T = videoLatentFrames(39);
    const pages = new Set([0, Math.floor((T - 1) / 2), T - 1]).size;
    for (const g of ok) {
      assert.deepEqual([g.width, g.height], [256, 148], JSON.stringify(g));
      assert.ok([1, pages].includes(g.pages ?? 1), JSON.stringify(g));
    }
    console.log(`# fastvid 352p 1 s 8 steps (${T} latent frames): previews at ${previews.map((p) => p.step).join(', ')} of ${pages} frame(s); fetched ${ok.length}`);
  });

  test('an unknown job: 404', async () => {
    const res = await t.http.get('/api/jobs/20990101_000000_0000/preview').set(auth);
    assert.equal(res.status, 404);
  });
});

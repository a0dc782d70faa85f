// The embedded default follows the prompt for video too (issue 18): through the real API on the trained demo
// checkpoint (assets/demo/minimax-h3), 8 prompts of the video grammar (every direction twice, both beeps) on the
// default profile with its default steps, 1 s at 352p: the ball's color, its direction of motion (centroid over frames)
// and the soundtrack's band (high vs low) are all right in at least 7 of 8. /api/config says what the demo makes and
// what the page should preselect; the same seed gives the same bytes; a keyframe (i2v) job runs on it. It runs with
// DEMO_VIDEO=trained (the harness runs every other test on the random video demo: its jobs take seconds, not minutes).
// Skipped, saying so, while the checkout has no trained video demo (the random demo makes noise: docs/models/demo.md
// "The video demo").
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { TRAINED_H3_DEMO_PATH } from '../../src/models/minimax_h3/trained-demo';
import { projectRoot } from '../../src/paths';
import { decodeAudioTrack, ffmpeg } from '../media/helpers';
import { judgeClip, pickVideoPrompts, videoPromptText, type VideoDemoPrompt } from './demo-video-grammar';
import { auth, startAppOnDemoWeights, TestApp, until } from './harness';
import { dataUri } from './inputs';
import { fetchCheckedMp4 } from './video-output';

const PROMPTS = 8;
/** The pick of prompts: any seed works; this one is fixed so every run checks the same 8. */
const PICK_SEED = 18;
const W = 608, H = 352, FRAMES = 39;

/** Every frame of an mp4 as rgb24 HWC. */
function allFrames(path: string): Buffer[] {
  const { stdout } = ffmpeg(['-i', path, '-map', '0:v:0', '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-']);
  const size = W * H * 3;
  assert.equal(stdout.length % size, 0);
  return Array.from({ length: stdout.length / size }, (_, i) => stdout.subarray(i * size, (i + 1) * size));
}

const trained = existsSync(join(projectRoot(), TRAINED_H3_DEMO_PATH, 'model_index.json'));

describe('the trained video demo makes what the prompt asks (fastvid on demo weights)', { skip: trained ? false : `no trained video demo at ${TRAINED_H3_DEMO_PATH} yet` }, () => {
  let t: TestApp;
  let scratch: string;
  /** The first clip of the prompt check, for the same-seed check to repeat (one job less: each takes minutes). */
  let first: { p: VideoDemoPrompt; seed: number; path: string } | undefined;
  before(async () => {
    t = await startAppOnDemoWeights({ env: { DEMO_VIDEO: 'trained' } });
    scratch = mkdtempSync(join(tmpdir(), 'kiln-demo-video-'));
  });
  after(async () => {
    await t.close(true);
    rmSync(scratch, { recursive: true, force: true });
  });

  async function make(p: VideoDemoPrompt, seed: number): Promise<{ path: string; job: Record<string, any> }> {
    const res = await t.http.post('/api/v1/generate').set(auth).send({ prompt: videoPromptText(p), res: '352p', seconds: 1, seed });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const job = await until(t, res.body.id, (j) => j.status === 'done' || j.status === 'failed', 600_000);
    assert.equal(job.status, 'done', JSON.stringify(job));
    return { path: await fetchCheckedMp4(t, job, FRAMES, scratch), job };
  }

  test('/api/config says what the demo makes and what the page preselects', async () => {
    const cfg = (await t.http.get('/api/config').set(auth)).body;
    for (const name of ['fastvid', 'turbo_int8', 'fastvid_4step_int8', 'fastvid_fast', 'basevid50', 'basevid50_sol']) {
      const p = cfg.profiles.find((x: { profile: string }) => x.profile === name);
      assert.equal(p.weights, 'demo', name);
      assert.match(p.note, /trained on procedural clips.*a <color> ball moving <left\|right\|up\|down> on a <color> background, <high\|low> beep/, name);
      assert.deepEqual([p.suggested.aspect, p.suggested.res, p.suggested.seconds], ['16:9', '352p', 1], name);
      assert.match(p.suggested.prompt, /^a \w+ ball moving (left|right|up|down) on a \w+ background, (high|low) beep$/);
    }
  });

  test(`${PROMPTS} prompts at 352p 1 s: ball color, direction and beep all right in at least 7`, async () => {
    const wrong: string[] = [];
    let steps = 0;
    for (const [i, p] of pickVideoPrompts(PROMPTS, PICK_SEED).entries()) {
      const { path, job } = await make(p, 100 + i);
      first ??= { p, seed: 100 + i, path };
      steps = job.steps;
      const got = judgeClip(allFrames(path), W, H, decodeAudioTrack(path, 32000, 2), 32000);
      const ok = got.ball === p.color && got.direction === p.direction && got.beep === p.beep;
      console.log(`# ${ok ? 'ok' : 'WRONG'} "${videoPromptText(p)}": ball ${got.ball}, ${got.direction}, background ${got.background}, ${got.beep} beep (band ratio ${got.bandRatio.toFixed(2)}); exec_s ${job.exec_s}`);
      if (!ok) wrong.push(`"${videoPromptText(p)}": ${JSON.stringify(got)}`);
    }
    console.log(`# all three right in ${PROMPTS - wrong.length}/${PROMPTS} (fastvid, ${steps} steps)`);
    assert.ok(wrong.length <= 1, `${wrong.length} of ${PROMPTS} wrong: ${wrong.join('; ')}`);
  });

  test('a keyframe (i2v) job runs on the trained demo too: a valid mp4', async () => {
    // a blue frame with a red disc, the grammar's colours; following the picture is not required (issue 18)
    const disc = Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}"><rect width="100%" height="100%" fill="rgb(30,60,220)"/><circle cx="150" cy="176" r="35" fill="rgb(220,30,30)"/></svg>`);
    const png = await sharp(disc).png().toBuffer();
    const res = await t.http.post('/api/v1/generate').set(auth)
      .send({ prompt: 'a red ball moving right on a blue background, high beep', res: '352p', seconds: 1, seed: 5, steps: 2, images: [dataUri('image/png', png)] });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const job = await until(t, res.body.id, (j) => j.status === 'done' || j.status === 'failed', 600_000);
    assert.equal(job.status, 'done', JSON.stringify(job));
    assert.deepEqual([job.mode, job.image_count], ['i2v', 1]);
    await fetchCheckedMp4(t, job, FRAMES, scratch);
  });

  test('the same seed gives the same bytes', async () => {
    const { p, seed } = first ?? { p: { color: 'yellow', direction: 'left', background: 'purple', beep: 'low' } as VideoDemoPrompt, seed: 7 };
    const a = first?.path ?? (await make(p, seed)).path;
    const b = await make(p, seed);
    assert.ok(readFileSync(a).equals(readFileSync(b.path)), 'same prompt and seed, same mp4 bytes');
  });
});

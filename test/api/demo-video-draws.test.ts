// The embedded default follows the prompt for video too (issue 18): through the real API on the trained demo
// checkpoint (assets/demo/minimax-h3) on the default profile: /api/config says what the demo makes and what the page
// should preselect; one prompt of the video grammar at 352p 1 s with the profile's default steps gets the ball's color,
// its direction of motion (centroid over frames) and the soundtrack's band (high vs low) right; a keyframe (i2v) job
// runs on it, and the same seed gives the same bytes. The grammar's score over 8 prompts (every direction twice, both
// beeps; 7 of 8 needed) is `npm run bench:video-demo`: a job takes about 5 minutes on lavapipe, and 10 of them made
// this file 52 of CI's 58 minutes. It runs with DEMO_VIDEO=trained (the harness runs every other test on the random
// video demo: its jobs take seconds, not minutes). Skipped, saying so, while the checkout has no trained video demo
// (the random demo makes noise: docs/models/demo.md "The video demo").
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { TRAINED_H3_DEMO_PATH } from '../../src/models/minimax_h3/trained-demo';
import { projectRoot } from '../../src/paths';
import { pickVideoPrompts, videoPromptText } from './demo-video-grammar';
import { H, judgePromptClip, runDemoVideoJob, W } from './demo-video-jobs';
import { auth, startAppOnDemoWeights, TestApp } from './harness';
import { dataUri } from './inputs';

/** The prompt checked here: the bench's second (pick seed 18, job seed 101), one the demo gets right at this seed
 * (the bench's first, a yellow ball at seed 100, comes out orange: the 1 of 8 the bench allows). */
const PROMPT = pickVideoPrompts(8, 18)[1]!;
const SEED = 101;

const trained = existsSync(join(projectRoot(), TRAINED_H3_DEMO_PATH, 'model_index.json'));

describe('the trained video demo makes what the prompt asks (fastvid on demo weights)', { skip: trained ? false : `no trained video demo at ${TRAINED_H3_DEMO_PATH} yet` }, () => {
  let t: TestApp;
  let scratch: string;
  before(async () => {
    t = await startAppOnDemoWeights({ env: { DEMO_VIDEO: 'trained' } });
    scratch = mkdtempSync(join(tmpdir(), 'kiln-demo-video-'));
  });
  after(async () => {
    await t.close(true);
    rmSync(scratch, { recursive: true, force: true });
  });

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

  test('one prompt at 352p 1 s with the default steps: ball color, direction and beep right', async () => {
    const { path, job } = await runDemoVideoJob(t, { prompt: videoPromptText(PROMPT), seed: SEED }, scratch);
    const { ok, line } = judgePromptClip(PROMPT, path);
    console.log(`# ${line}; ${job.steps} steps, exec_s ${job.exec_s}`);
    assert.ok(ok, line);
  });

  test('a keyframe (i2v) job runs on the trained demo too (a valid mp4), and the same seed gives the same bytes', async () => {
    // a blue frame with a red disc, the grammar's colours; following the picture is not required (issue 18)
    const disc = Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}"><rect width="100%" height="100%" fill="rgb(30,60,220)"/><circle cx="150" cy="176" r="35" fill="rgb(220,30,30)"/></svg>`);
    const png = await sharp(disc).png().toBuffer();
    const body = { prompt: 'a red ball moving right on a blue background, high beep', seed: 5, steps: 2, images: [dataUri('image/png', png)] };
    const a = await runDemoVideoJob(t, body, scratch);
    assert.deepEqual([a.job.mode, a.job.image_count], ['i2v', 1]);
    const b = await runDemoVideoJob(t, body, scratch);
    assert.ok(readFileSync(a.path).equals(readFileSync(b.path)), 'same request and seed, same mp4 bytes');
  });
});

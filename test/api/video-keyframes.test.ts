// Keyframe video jobs (image_mode keyframe, mode i2v) through the real app on the demo MiniMax H3 checkpoint: 1 image
// by POST /api/v1/generate (data URI), 2 by multipart POST /api/jobs, 3 (guides) by /api/v1/generate; each runs to an
// mp4 with H.264 at the job's size and frame count, 24 fps, and a stereo 32 kHz AAC track, and the job says mode i2v
// and its image_count. Refused at creation with a 400, nothing stored: 7 images, a file that is not an image, a sliver
// whose cover scale onto the frame would pass 67 megapixels.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { fetchCheckedMp4 } from './video-output';
import { auth, startAppOnDemoWeights, TestApp, until } from './harness';
import { dataUri } from './inputs';

/** A 200x120 png of a diagonal gradient in the hue `r` (keyframes of different content and aspect). */
async function picture(r: number): Promise<Buffer> {
  const w = 200;
  const h = 120;
  const px = Buffer.alloc(w * h * 3);
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) px.set([r, (x + y) % 256, 255 - ((2 * x) % 256)], (y * w + x) * 3);
  return sharp(px, { raw: { width: w, height: h, channels: 3 } }).png().toBuffer();
}

describe('keyframe video jobs through the API (demo weights)', () => {
  let t: TestApp;
  let scratch: string;
  const pics: Buffer[] = [];
  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'kiln-video-keyframes-'));
    t = await startAppOnDemoWeights();
    for (const r of [30, 120, 220, 60, 160, 250, 90]) pics.push(await picture(r));
  });
  after(async () => {
    await t.close(true);
    rmSync(scratch, { recursive: true, force: true });
  });

  /** A finished job's mp4: H.264 608x352 at 24 fps with `frames` frames and a stereo 32 kHz AAC track. */
  const checkVideo = (job: Record<string, any>, frames: number) => fetchCheckedMp4(t, job, frames, scratch);


  test('1 keyframe by POST /api/v1/generate: mode i2v, image_count 1, a valid mp4', async () => {
    const started = Date.now();
    const res = await t.http.post('/api/v1/generate').set(auth)
      .send({ prompt: 'a kite over the sea', seconds: 1, res: '352p', seed: 3, steps: 2, images: [dataUri('image/png', pics[0]!)], wait: true, timeout: 300 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const job = res.body;
    assert.equal(job.status, 'done', JSON.stringify(job));
    assert.deepEqual([job.mode, job.image_count, job.size, job.frames, job.steps], ['i2v', 1, '608x352', 39, 2]);
    await checkVideo(job, 39);
    console.log(`# 1 keyframe, 352p 1 s, 2 steps (demo generation and load included): ${Date.now() - started} ms; exec_s ${job.exec_s}`);
  });

  test('2 keyframes by multipart POST /api/jobs: mode i2v, image_count 2, a valid mp4', async () => {
    const res = await t.http.post('/api/jobs').set(auth)
      .field('prompt', 'a kite over the sea').field('seconds', '1').field('res', '352p').field('seed', '4').field('steps', '2')
      .attach('images', pics[1]!, 'first.png').attach('images', pics[2]!, 'last.png');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual([res.body.mode, res.body.image_count], ['i2v', 2]);
    const job = await until(t, res.body.id, (j) => j.status === 'done' || j.status === 'failed', 180_000);
    assert.equal(job.status, 'done', JSON.stringify(job));
    await checkVideo(job, 39);
    console.log(`# 2 keyframes, 352p 1 s, 2 steps (model loaded): exec_s ${job.exec_s}`);
  });

  test('3 keyframes (first, middle, last) by POST /api/v1/generate: mode i2v, image_count 3, a valid mp4', async () => {
    const res = await t.http.post('/api/v1/generate').set(auth)
      .send({ prompt: 'a kite over the sea', seconds: 1, res: '352p', seed: 5, steps: 2, image_mode: 'keyframe', images: pics.slice(3, 6).map((p) => dataUri('image/png', p)), wait: true, timeout: 300 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const job = res.body;
    assert.equal(job.status, 'done', JSON.stringify(job));
    assert.deepEqual([job.mode, job.image_count, job.frames], ['i2v', 3, 39]);
    await checkVideo(job, 39);
    console.log(`# 3 keyframes, 352p 1 s, 2 steps (model loaded): exec_s ${job.exec_s}`);
  });

  test('refused with a 400 before anything is queued: 7 images, a non-image, a sliver', async () => {
    const before = (await t.http.get('/api/jobs').set(auth)).body.length;
    const img = dataUri('image/png', pics[0]!);
    const sliver = await sharp({ create: { width: 8000, height: 10, channels: 3, background: { r: 9, g: 99, b: 199 } } }).png().toBuffer();
    const cases: [object, RegExp][] = [
      [{ images: pics.map((p) => dataUri('image/png', p)) }, /^too many images: 7 given, a video takes at most 6$/],
      [{ images: [img, dataUri('image/png', Buffer.from('this is not a picture'))] }, /^images\[1\]: /],
      [{ images: [dataUri('image/png', sliver)] }, /^images\[0\]: a 8000x10 picture would be scaled to 281600x352 to cover the 608x352 frame before its crop, over 67 megapixels; crop it closer to the frame's aspect$/],
    ];
    for (const [body, reason] of cases) {
      const res = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'x', seconds: 1, res: '352p', ...body });
      assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(res.body)}`);
      assert.match(res.body.detail, reason);
    }
    let res = await t.http.post('/api/jobs').set(auth).field('prompt', 'x').attach('images', Buffer.from('plain text'), 'notes.png');
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /^images\[0\] \(notes\.png\): /);
    const seven = t.http.post('/api/jobs').set(auth).field('prompt', 'x');
    for (const p of pics) seven.attach('images', p, 'k.png');
    res = await seven;
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /^too many images: 7 given/);
    assert.equal((await t.http.get('/api/jobs').set(auth)).body.length, before, 'no job stored');
  });
});

// Reference video jobs (image_mode reference, mode i2v) through the real app on the demo MiniMax H3 checkpoint (the
// pipeline swaps the demo's transformer_ref/ in, with the profile's Ref2VA adapter merged on the distilled and turbo
// profiles: fastvid by JSON with and without a voice, fastvid_4step_int8 by multipart with a voice): on basevid50 1 picture
// by POST /api/v1/generate (data URI) and 2 by multipart POST /api/jobs each run to an mp4 with H.264 at the job's
// size and frame count, 24 fps, a stereo 32 kHz AAC track; the job says mode i2v and its image_count, `prompt` is the
// text sent and the extension `model_prompt` the text the model was given (a "<Picture n> is a reference image: ..."
// line in front for each picture the prompt does not name). A picture with a soundtrack (audio_mode track): the mp4's
// audio is the clip, and model_prompt defines <Audio 1> as fully_copy. Refused at creation with a 400, nothing stored:
// a picture beyond 4:1 (references with voices:
// video-voices.test.ts; with tts_text: video-tts.test.ts).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { referencePrompt } from '../../src/catalog';
import { fetchCheckedMp4 } from './video-output';
import { decodeAudioTrack } from '../media/helpers';
import { auth, startAppOnDemoWeights, TestApp } from './harness';
import { correlation, dataUri, stereoWavBytes, wavBytes } from './inputs';

/** A w x h png of a diagonal gradient in the hue `r`. */
async function picture(r: number, w = 200, h = 120): Promise<Buffer> {
  const px = Buffer.alloc(w * h * 3);
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) px.set([r, (x + y) % 256, 255 - ((2 * x) % 256)], (y * w + x) * 3);
  return sharp(px, { raw: { width: w, height: h, channels: 3 } }).png().toBuffer();
}

describe('reference video jobs through the API (demo weights)', () => {
  let t: TestApp;
  let scratch: string;
  const pics: Buffer[] = [];
  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'kiln-video-references-'));
    t = await startAppOnDemoWeights();
    pics.push(await picture(30), await picture(200, 90, 160));
  });
  after(async () => {
    await t.close(true);
    rmSync(scratch, { recursive: true, force: true });
  });

  test('1 reference by POST /api/v1/generate on basevid50: mode i2v, prompt as sent, model_prompt prefixed, a valid mp4', async () => {
    const started = Date.now();
    const prompt = 'a kite over the sea';
    const res = await t.http.post('/api/v1/generate').set(auth)
      .send({ prompt, profile: 'basevid50', image_mode: 'reference', seconds: 1, res: '352p', seed: 3, steps: 2, images: [dataUri('image/png', pics[0]!)], wait: true, timeout: 300 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const job = res.body;
    assert.equal(job.status, 'done', JSON.stringify(job));
    assert.deepEqual([job.mode, job.image_count, job.size, job.frames, job.steps], ['i2v', 1, '608x352', 39, 2]);
    assert.equal(job.prompt, prompt, 'prompt: what was sent');
    assert.equal(job.model_prompt, `<Picture 1> is a reference image: follow its subjects and style; the video does not start on it.\n${prompt}`);
    await fetchCheckedMp4(t, job, 39, scratch);
    const again = (await t.http.get(`/api/jobs/${job.id}`).set(auth)).body;
    assert.deepEqual([again.prompt, again.model_prompt], [job.prompt, job.model_prompt], 'GET /api/jobs/{id} shows both');
    console.log(`# 1 reference, 352p 1 s, 2 steps (demo generation and load included): ${Date.now() - started} ms; exec_s ${job.exec_s}`);
  });

  test('2 references by multipart POST /api/jobs on basevid50_sol: the prompt names <Picture 2> only, so only <Picture 1> is prefixed', async () => {
    const prompt = 'a dog from <Picture 2> runs along the beach';
    const res = await t.http.post('/api/jobs').set(auth)
      .field('prompt', prompt).field('profile', 'basevid50_sol').field('image_mode', 'reference').field('seconds', '1').field('res', '352p').field('seed', '4').field('steps', '2')
      .attach('images', pics[0]!, 'a.png').attach('images', pics[1]!, 'b.png');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual([res.body.mode, res.body.image_count, res.body.prompt], ['i2v', 2, prompt]);
    assert.equal(res.body.model_prompt, `<Picture 1> is a reference image: follow its subjects and style; the video does not start on it.\n${prompt}`);
    assert.equal(res.body.model_prompt, referencePrompt(prompt, 2));
    const job = (await t.http.get(`/api/jobs/${res.body.id}?wait=true&timeout=300`).set(auth)).body;
    assert.equal(job.status, 'done', JSON.stringify(job));
    await fetchCheckedMp4(t, job, 39, scratch);
    console.log(`# 2 references, 352p 1 s, 2 steps: exec_s ${job.exec_s}`);
    // a keyframe job has no model_prompt (its prompt is given as it is)
    const kf = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'x', profile: 'basevid50', seconds: 1, res: '352p', images: [dataUri('image/png', pics[0]!)] });
    assert.equal(kf.status, 200);
    assert.equal('model_prompt' in kf.body, false);
    await t.http.delete(`/api/jobs/${kf.body.id}`).set(auth);
  });

  // issue 50: every profile runs references, on transformer_ref/ with its Ref2VA adapter merged (the demo carries them
  // in the published layout: Minimax-h3-Turbo/ref2va-8step/, ref2va-4step/)
  test('references on the distilled and turbo profiles: fastvid (the default) by JSON with and without a voice, fastvid_4step_int8 by multipart with a voice, each a valid mp4', async () => {
    const res = await t.http.post('/api/v1/generate').set(auth)
      .send({ prompt: 'a kite over the sea', image_mode: 'reference', seconds: 1, res: '352p', seed: 5, steps: 2, images: [dataUri('image/png', pics[0]!)] });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual([res.body.profile, res.body.mode, res.body.image_count], ['fastvid', 'i2v', 1]);
    const mp = await t.http.post('/api/jobs').set(auth)
      .field('prompt', 'the man from <Picture 1> says "hello" to the camera').field('profile', 'fastvid_4step_int8').field('seconds', '1').field('res', '352p').field('seed', '6').field('steps', '2')
      .attach('images', pics[1]!, 'man.png').attach('audios', wavBytes(3), 'voice.wav');
    assert.equal(mp.status, 200, JSON.stringify(mp.body));
    assert.deepEqual([mp.body.profile, mp.body.mode, mp.body.image_count], ['fastvid_4step_int8', 'i2v', 1]);
    // the voice makes it a reference job, defined for the model as on basevid50
    assert.match(mp.body.model_prompt, /^<Audio 1> is the voice-timbre reference for the speaker/m);
    // and a voice with a picture on fastvid itself, by JSON (the proof's matrix: both profiles, both modes)
    const voiced = await t.http.post('/api/v1/generate').set(auth)
      .send({ prompt: 'the woman from <Picture 1> says "good morning"', seconds: 1, res: '352p', seed: 7, steps: 2, images: [dataUri('image/png', pics[0]!)], audios: [dataUri('audio/wav', wavBytes(3))] });
    assert.equal(voiced.status, 200, JSON.stringify(voiced.body));
    assert.deepEqual([voiced.body.profile, voiced.body.mode, voiced.body.image_count], ['fastvid', 'i2v', 1]);
    assert.match(voiced.body.model_prompt, /^<Audio 1> is the voice-timbre reference for the speaker/m);
    for (const id of [res.body.id, mp.body.id, voiced.body.id]) {
      const job = (await t.http.get(`/api/jobs/${id}?wait=true&timeout=300`).set(auth)).body;
      assert.equal(job.status, 'done', JSON.stringify(job));
      await fetchCheckedMp4(t, job, 39, scratch);
      console.log(`# references on ${job.profile}${id === res.body.id ? '' : ' with a voice'} (352p 1 s, 2 steps, transformer_ref + its Ref2VA adapter; load included): exec_s ${job.exec_s}`);
    }
  });

  test('a picture + a 3 s soundtrack (audio_mode track) by POST /api/v1/generate on basevid50: the mp4\'s audio is the clip, <Audio 1> fully_copy', async () => {
    const prompt = 'a singer on a stage';
    const clip = stereoWavBytes(3);
    const res = await t.http.post('/api/v1/generate').set(auth)
      .send({ prompt, profile: 'basevid50', image_mode: 'reference', audio_mode: 'track', seconds: 1, res: '352p', seed: 5, steps: 2, images: [dataUri('image/png', pics[0]!)], audios: [dataUri('audio/wav', clip)], wait: true, timeout: 300 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const job = res.body;
    assert.equal(job.status, 'done', JSON.stringify(job));
    assert.deepEqual([job.mode, job.image_count, job.prompt], ['i2v', 1, prompt]);
    assert.equal(job.model_prompt, `<Picture 1> is a reference image: follow its subjects and style; the video does not start on it.\n<Audio 1> is the soundtrack: fully_copy - <Audio 1> is reused 1:1 as the target video's complete final audio track.\n${prompt}`);
    const path = await fetchCheckedMp4(t, job, 39, scratch);
    const clipPath = join(scratch, `${job.id}-clip.wav`);
    writeFileSync(clipPath, clip);
    const got = decodeAudioTrack(path, 32000, 2);
    const want = decodeAudioTrack(clipPath, 32000, 2);
    const n = 52000; // 39 frames at 24 fps = 1.625 s at 32 kHz: the clip is cut there
    const r = correlation(got, want, 2 * Math.min(n, got.length / 2));
    console.log(`# 1 reference + a 3 s soundtrack (352p 1 s, 2 steps): exec_s ${job.exec_s}; mp4 audio vs clip r ${r.toFixed(6)}`);
    assert.ok(r > 0.99, `r ${r}`);
  });

  test('refused with a 400 before anything is queued: a picture beyond 4:1', async () => {
    const before = (await t.http.get('/api/jobs').set(auth)).body.length;
    const img = dataUri('image/png', pics[0]!);
    const wide = dataUri('image/png', await picture(10, 500, 100));
    const cases: [object, RegExp][] = [
      [{ images: [wide] }, /^images\[0\]: a 500x100 reference picture is outside the aspects MiniMax H3 takes references at \(1:4 to 4:1\); crop it$/],
    ];
    for (const [body, reason] of cases) {
      const res = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'x', profile: 'basevid50', image_mode: 'reference', seconds: 1, res: '352p', ...body });
      assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(res.body)}`);
      assert.match(res.body.detail, reason);
    }
    assert.equal((await t.http.get('/api/jobs').set(auth)).body.length, before, 'no job stored');
  });
});

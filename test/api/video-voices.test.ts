// Voice video jobs (audio_mode voice, the default, with pictures: the image mode switches to reference) through the
// real app on the demo MiniMax H3 checkpoint, on basevid50 and basevid50_sol (the distilled and turbo profiles:
// video-references.test.ts): a picture + 1 voice by
// POST /api/v1/generate (data URIs) and a picture + 2 voices by multipart POST /api/jobs each run to an mp4 with
// H.264 at the job's size and frame count, 24 fps, a stereo 32 kHz AAC track; `prompt` is the text sent and the
// extension `model_prompt` the text the model was given (a <Picture n> line, then an "<Audio n> is the voice-timbre
// reference ..." line for each one the prompt does not name). Refused at creation with a 400, nothing stored: a voice
// without pictures whose prompt quotes nothing, two without pictures, 4 clips, a clip outside 2 to 15 s, voices
// longer than 15 s together.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { referencePrompt } from '../../src/catalog';
import { fetchCheckedMp4 } from './video-output';
import { auth, startAppOnDemoWeights, TestApp } from './harness';
import { dataUri, pngBytes, stereoWavBytes, wavBytes } from './inputs';

const VOICE_LINE = (n: number) => `<Audio ${n}> is the voice-timbre reference for the speaker (S${n}); the dialogue follows its voice timbre without copying the original signal.`;
const PICTURE_LINE = '<Picture 1> is a reference image: follow its subjects and style; the video does not start on it.';

describe('voice video jobs through the API (demo weights)', () => {
  let t: TestApp;
  let scratch: string;
  let png: Buffer;
  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'kiln-video-voices-'));
    t = await startAppOnDemoWeights();
    png = await pngBytes(160, 120);
  });
  after(async () => {
    await t.close(true);
    rmSync(scratch, { recursive: true, force: true });
  });

  test('a picture + 1 voice by POST /api/v1/generate on basevid50: mode i2v, prompt as sent, model_prompt with both definitions, a valid mp4', async () => {
    const started = Date.now();
    const prompt = 'a woman on a porch says good morning';
    const res = await t.http.post('/api/v1/generate').set(auth).send({
      prompt, profile: 'basevid50', seconds: 1, res: '352p', seed: 5, steps: 2, wait: true, timeout: 300,
      images: [dataUri('image/png', png)], audios: [dataUri('audio/wav', wavBytes(3, 16000, 220))],
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const job = res.body;
    assert.equal(job.status, 'done', JSON.stringify(job));
    assert.deepEqual([job.mode, job.image_count, job.size, job.frames, job.steps], ['i2v', 1, '608x352', 39, 2]);
    assert.equal(job.prompt, prompt, 'prompt: what was sent');
    assert.equal(job.model_prompt, `${PICTURE_LINE}\n${VOICE_LINE(1)}\n${prompt}`);
    await fetchCheckedMp4(t, job, 39, scratch);
    const again = (await t.http.get(`/api/jobs/${job.id}`).set(auth)).body;
    assert.deepEqual([again.prompt, again.model_prompt], [job.prompt, job.model_prompt], 'GET /api/jobs/{id} shows both, after the inputs are gone');
    console.log(`# 1 picture + 1 voice, 352p 1 s, 2 steps (demo generation and loads included): ${Date.now() - started} ms; exec_s ${job.exec_s}`);
  });

  test('a picture + 2 voices by multipart POST /api/jobs on basevid50_sol: the prompt names <Audio 1>, so <Audio 2> is defined', async () => {
    const prompt = '<Picture 1> shows two friends; the first speaks with the voice of <Audio 1>';
    const res = await t.http.post('/api/jobs').set(auth)
      .field('prompt', prompt).field('profile', 'basevid50_sol').field('audio_mode', 'voice').field('seconds', '1').field('res', '352p').field('seed', '6').field('steps', '2')
      .attach('images', png, 'friends.png')
      .attach('audios', stereoWavBytes(2.5, 44100), 'a.wav').attach('audios', wavBytes(3, 22050, 330), 'b.wav');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual([res.body.mode, res.body.image_count, res.body.prompt], ['i2v', 1, prompt]);
    assert.equal(res.body.model_prompt, `${VOICE_LINE(2)}\n${prompt}`);
    assert.equal(res.body.model_prompt, referencePrompt(prompt, 1, 2));
    const job = (await t.http.get(`/api/jobs/${res.body.id}?wait=true&timeout=300`).set(auth)).body;
    assert.equal(job.status, 'done', JSON.stringify(job));
    await fetchCheckedMp4(t, job, 39, scratch);
    console.log(`# 1 picture + 2 voices, 352p 1 s, 2 steps: exec_s ${job.exec_s}`);
  });

  test('refused with a 400 before anything is queued: no picture, 4 clips, a clip outside 2 to 15 s, 15 s together', async () => {
    const before = (await t.http.get('/api/jobs').set(auth)).body.length;
    const img = dataUri('image/png', png);
    const v3 = dataUri('audio/wav', wavBytes(3));
    const v8 = dataUri('audio/wav', wavBytes(8));
    const cases: [object, RegExp][] = [
      [{ audios: [v3] }, /^audios: a voice without pictures speaks the prompt's quoted dialogue, and the prompt quotes none: write what is said in quotes \(A man says "good morning"\), or set tts_text, or give a picture of who speaks, or use audio_mode track for a soundtrack$/],
      [{ prompt: 'He says "hi"', audios: [v3, v3] }, /^audios: without pictures a voice speaks the prompt's quoted dialogue as the soundtrack, so one clip is taken \(2 given\); for several speakers give their pictures/],
      [{ images: [img], audios: [v3, v3, v3, v3] }, /^too many audios: 4 given, a video takes at most 3$/],
      [{ images: [img], audios: [v3, dataUri('audio/wav', wavBytes(1))] }, /^audios\[1\]: clip is 1\.00 s long; clips must be 2 to 15 s$/],
      [{ images: [img], audios: [dataUri('audio/wav', wavBytes(20))] }, /^audios\[0\]: clip is 20\.00 s long; clips must be 2 to 15 s$/],
      [{ images: [img], audios: [v8, v8] }, /^audios: the voices are 8\.00 \+ 8\.00 = 16\.00 s long; together they may be at most 15 s: shorten or drop one$/],
    ];
    for (const [body, reason] of cases) {
      const res = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'x', profile: 'basevid50', seconds: 1, res: '352p', ...body });
      assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(res.body).slice(0, 300)}`);
      assert.match(res.body.detail, reason);
    }
    // the same by multipart: 15 s together is refused there too
    const mp = await t.http.post('/api/jobs').set(auth).field('prompt', 'x').field('profile', 'basevid50').field('seconds', '1').field('res', '352p')
      .attach('images', png, 'p.png').attach('audios', wavBytes(8), 'a.wav').attach('audios', wavBytes(8), 'b.wav');
    assert.equal(mp.status, 400, JSON.stringify(mp.body));
    assert.match(mp.body.detail, /^audios: the voices are 8\.00 \+ 8\.00 = 16\.00 s long/);
    assert.equal((await t.http.get('/api/jobs').set(auth)).body.length, before, 'no job stored');
  });
});

// Track video jobs (audio_mode track: clip 1 is the soundtrack from frame 0) through the real app on the demo MiniMax
// H3 checkpoint: a clip longer than the video by POST /api/v1/generate (data URI) is cut, a shorter one with a keyframe
// by multipart POST /api/jobs is padded with silence; each runs to an mp4 with H.264 at the job's size and frame count,
// 24 fps, and a stereo 32 kHz AAC track that is the input clip itself (both decoded to 32 kHz: Pearson r > 0.99 over
// the overlap, silence after a short clip). Refused at creation with a 400, nothing stored: a 1 s clip, a 20 s clip, a
// file that is not audio, 2 clips in track mode, a voice without a picture, reference pictures with a track (tts_text
// runs: video-tts.test.ts; voices: video-voices.test.ts).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { decodeAudioTrack, rms } from '../media/helpers';
import { fetchCheckedMp4 } from './video-output';
import { auth, startAppOnDemoWeights, TestApp, until } from './harness';
import { correlation, dataUri, pngBytes, stereoWavBytes, wavBytes } from './inputs';

describe('track video jobs through the API (demo weights)', () => {
  let t: TestApp;
  let scratch: string;
  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'kiln-video-track-'));
    t = await startAppOnDemoWeights();
  });
  after(async () => {
    await t.close(true);
    rmSync(scratch, { recursive: true, force: true });
  });

  /** A finished job's mp4 (checked: H.264 608x352 at 24 fps, `frames` frames, stereo 32 kHz AAC) and its audio and
   * the clip's, both decoded to 32 kHz stereo (interleaved). */
  const checkVideo = async (job: Record<string, any>, frames: number, clip: Buffer) => {
    const path = await fetchCheckedMp4(t, job, frames, scratch);
    const clipPath = join(scratch, `${job.id}-clip.wav`);
    writeFileSync(clipPath, clip);
    return { got: decodeAudioTrack(path, 32000, 2), want: decodeAudioTrack(clipPath, 32000, 2) };
  };

  test('a 3 s clip by POST /api/v1/generate, 1 s video: the mp4\'s audio is the clip, cut at the video\'s end', async () => {
    const started = Date.now();
    const clip = stereoWavBytes(3);
    const res = await t.http.post('/api/v1/generate').set(auth)
      .send({ prompt: 'a singer on a stage', seconds: 1, res: '352p', seed: 3, steps: 2, audio_mode: 'track', audios: [dataUri('audio/wav', clip)], wait: true, timeout: 300 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const job = res.body;
    assert.equal(job.status, 'done', JSON.stringify(job));
    assert.deepEqual([job.mode, job.image_count, job.size, job.frames, job.steps], ['t2v', 0, '608x352', 39, 2]);
    const { got, want } = await checkVideo(job, 39, clip);
    const n = 52000; // 39 frames at 24 fps = 1.625 s at 32 kHz
    assert.ok(Math.abs(got.length / 2 - n) < 1100, `the mp4's audio lasts the video: ${got.length / 2} samples per channel`);
    const r = correlation(got, want, 2 * Math.min(n, got.length / 2));
    console.log(`# track cut (3 s clip, 352p 1 s, 2 steps; demo generation and load included): ${Date.now() - started} ms, exec_s ${job.exec_s}; mp4 audio vs clip r ${r.toFixed(6)}`);
    assert.ok(r > 0.99, `r ${r}`);
  });

  test('a 2 s clip with a keyframe by multipart POST /api/jobs, 2 s video (2.33 s): the clip, then silence', async () => {
    const clip = stereoWavBytes(2, 48000, 330, 550);
    const res = await t.http.post('/api/jobs').set(auth)
      .field('prompt', 'a singer on a stage').field('seconds', '2').field('res', '352p').field('seed', '4').field('steps', '2').field('audio_mode', 'track')
      .attach('audios', clip, 'song.wav').attach('images', await pngBytes(200, 120), 'first.png');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual([res.body.mode, res.body.image_count, res.body.frames], ['i2v', 1, 56]);
    const job = await until(t, res.body.id, (j) => j.status === 'done' || j.status === 'failed', 300_000);
    assert.equal(job.status, 'done', JSON.stringify(job));
    const { got, want } = await checkVideo(job, 56, clip);
    assert.equal(want.length / 2, 64000);
    const r = correlation(got, want, want.length);
    const tail = rms(got, { from: 2 * (64000 + 1600) });
    console.log(`# track padded (2 s clip + 1 keyframe, 352p 2 s, 2 steps, model loaded): exec_s ${job.exec_s}; r ${r.toFixed(6)} over the clip, rms after it ${tail.toExponential(2)}`);
    assert.ok(r > 0.99, `r ${r}`);
    assert.ok(got.length / 2 > 64000 + 8000, 'the audio goes on past the clip');
    assert.ok(tail < 1e-3, `silence after the clip (rms ${tail})`);
  });

  test('refused with a 400 before anything is queued: clip lengths, not audio, 2 clips, what is not built yet', async () => {
    const before = (await t.http.get('/api/jobs').set(auth)).body.length;
    const ok = dataUri('audio/wav', wavBytes(3));
    const cases: [object, RegExp][] = [
      [{ audio_mode: 'track', audios: [dataUri('audio/wav', wavBytes(1))] }, /^audios\[0\]: clip is 1\.00 s long; clips must be 2 to 15 s$/],
      [{ audio_mode: 'track', audios: [dataUri('audio/wav', wavBytes(20))] }, /^audios\[0\]: clip is 20\.00 s long; clips must be 2 to 15 s$/],
      [{ audio_mode: 'track', audios: [dataUri('audio/wav', Buffer.from('this is not a sound at all'))] }, /^audios\[0\]: /],
      [{ audio_mode: 'track', audios: [ok, ok] }, /^audios: audio_mode track takes 1 clip \(the soundtrack\); 2 given$/],
      [{ audios: [ok] }, /^audios: a voice without pictures speaks the prompt's quoted dialogue, and the prompt quotes none: .*, or use audio_mode track for a soundtrack$/],
      [{ audios: [ok, ok], tts_text: 'hello there' }, /^audios: with tts_text, audios\[0\] is the voice the speech is spoken in and the speech is the soundtrack; more clips .* 2 given$/],
    ];
    for (const [body, reason] of cases) {
      const res = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'x', seconds: 1, res: '352p', ...body });
      assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(res.body).slice(0, 300)}`);
      assert.match(res.body.detail, reason);
    }
    let res = await t.http.post('/api/jobs').set(auth).field('prompt', 'x').field('audio_mode', 'track').attach('audios', Buffer.from('plain text'), 'song.mp3');
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /^audios\[0\] \(song\.mp3\): /);
    res = await t.http.post('/api/jobs').set(auth).field('prompt', 'x').field('audio_mode', 'track').attach('audios', wavBytes(3), 'a.wav').attach('audios', wavBytes(3), 'b.wav');
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /^audios: audio_mode track takes 1 clip/);
    assert.equal((await t.http.get('/api/jobs').set(auth)).body.length, before, 'no job stored');
  });
});

// tts_text video jobs (speech as the soundtrack) through the real app on the demo checkpoints (MiniMax H3 and
// Qwen3-TTS): by POST /api/v1/generate (data URI voice, audio_mode left at voice) and by multipart POST /api/jobs
// (audio_mode track and a keyframe: the speech still replaces the clip), each runs to an mp4 (H.264 608x352, 24 fps,
// the job's frames, stereo 32 kHz AAC) whose audio is the speech the tts profile's own pipeline makes from the same
// voice, text and seed (synthesised again here, in this process): sound for the speech's length, then silence to the
// video's end. With a reference picture (basevid50) the speech is the soundtrack too, and the model is told so
// (<Audio 1> fully_copy in model_prompt). Refused at creation with a 400, nothing stored: a voice the speech model
// cannot clone (under 3 s), 2 clips, no voice, an unknown tts_language. A voice without pictures (issue 50) is the
// same path with the prompt's quoted dialogue as the text, on fastvid and fastvid_4step_int8. A saved voice (issue 45,
// saved through the official `openai` SDK) named as `voice` in place of audios[0] speaks the same soundtrack.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI, { toFile } from 'openai';
import { referencePrompt } from '../../src/catalog';
import type { EngineHolder } from '../../src/engine/engine';
import { floatToPcm16, SPEECH_SAMPLE_RATE, wavHeader } from '../../src/media/wav';
import type { RunContext } from '../../src/models/common/pipeline';
import type { VideoTask as WorkerVideoTask } from '../../src/worker/protocol';
import { newSpeechPipeline, speechWeightsSource } from '../../src/worker/profiles/speech';
import { qwen3TtsTaskOf } from '../../src/models/qwen3_tts/task';
import { speechRequestOf } from '../../src/worker/profiles/video-speech';
import { testEngine } from '../engine/helpers';
import { decodeAudioTrack, rms } from '../media/helpers';
import { fetchCheckedMp4 } from './video-output';
import { auth, startAppOnDemoWeights, TestApp, TOKEN, until } from './harness';
import { correlation, dataUri, pngBytes, wavBytes } from './inputs';

const TEXT = 'Hello there, this is a test of the speech that becomes the soundtrack.';
const SEED = 11;

describe('tts_text video jobs through the API (demo weights)', () => {
  let t: TestApp;
  let scratch: string;
  const voice = wavBytes(4, 16000, 180);
  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'kiln-video-tts-'));
    t = await startAppOnDemoWeights();
  });
  after(async () => {
    await t.close(true);
    rmSync(scratch, { recursive: true, force: true });
  });

  /** The speech a job with this voice, text and seed speaks: the worker's own speech request (speechRequestOf ->
   * qwen3TtsTaskOf) through the tts profile's pipeline on the demo checkpoint the service generated, in this process. */
  const expectedSpeech = async (): Promise<Float32Array> => {
    const voicePath = join(scratch, 'voice.wav');
    writeFileSync(voicePath, voice);
    const weightsDir = join(scratch, 'no-weights');
    mkdirSync(weightsDir, { recursive: true });
    const e = await testEngine();
    let samples: Float32Array | null = null;
    const p = newSpeechPipeline(speechWeightsSource({ weightsDir, demoWeightsDir: t.settings.demoWeightsDir }), { get: async () => e } as unknown as EngineHolder, { onAudio: (s) => (samples = s) });
    const ctx: RunContext = { signal: new AbortController().signal, stage: () => {}, progress: () => {}, safePoint: async () => {} };
    const task = { id: 'expected', kind: 'video', profile: 'fastvid', images: [], audios: [voicePath], output: '', params: { tts_text: TEXT, tts_ref_text: '', tts_language: 'English', seed: SEED } } as unknown as WorkerVideoTask;
    await p.load(ctx);
    try {
      await p.run(qwen3TtsTaskOf(speechRequestOf(task, join(scratch, 'expected.wav'))), ctx);
    } finally {
      await p.unload();
    }
    return samples!;
  };

  /** The mp4's left channel at 32 kHz against the speech (24 kHz mono) taken to 32 kHz the way a track clip is. */
  const compare = (mp4: Float32Array, speech: Float32Array) => {
    const wav = join(scratch, 'speech.wav');
    writeFileSync(wav, Buffer.concat([wavHeader(SPEECH_SAMPLE_RATE, 1, speech.length), floatToPcm16(speech)]));
    const want = decodeAudioTrack(wav, 32000, 1);
    const left = mp4.filter((_, i) => i % 2 === 0);
    const n = Math.min(want.length, left.length);
    let end = left.length;
    while (end > 0 && Math.abs(left[end - 1]!) < 1e-3) end--;
    return { r: correlation(left, want, n), speechSamples: want.length, end, left };
  };

  let first: Float32Array | null = null;

  test('POST /api/v1/generate with tts_text and a voice, 1 s video: the mp4\'s audio is the speech, then silence', async () => {
    const started = Date.now();
    const res = await t.http.post('/api/v1/generate').set(auth).send({
      prompt: 'a man talks to the camera', seconds: 1, res: '352p', seed: SEED, steps: 2, audios: [dataUri('audio/wav', voice)],
      tts_text: TEXT, tts_language: 'English', wait: true, timeout: 300,
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const job = res.body;
    assert.equal(job.status, 'done', JSON.stringify(job));
    assert.deepEqual([job.mode, job.image_count, job.size, job.frames, job.steps], ['t2v', 0, '608x352', 39, 2]);
    const mp4 = decodeAudioTrack(await fetchCheckedMp4(t, job, 39, scratch), 32000, 2);
    first = mp4;
    const speech = await expectedSpeech();
    const { r, speechSamples, end, left } = compare(mp4, speech);
    const video = 52000; // 39 frames at 24 fps = 1.625 s at 32 kHz
    console.log(`# tts_text (352p 1 s, 2 steps; demo generation and both loads included): ${Date.now() - started} ms, exec_s ${job.exec_s}; speech ${(speech.length / 24000).toFixed(3)} s = ${speechSamples} samples at 32 kHz, mp4 sound ends at ${end}, r ${r.toFixed(6)} (AAC)`);
    assert.ok(Math.abs(left.length - video) < 1100, `the mp4's audio lasts the video: ${left.length}`);
    assert.ok(speechSamples < video, 'on the demo this speech is shorter than the video');
    assert.ok(Math.abs(end - speechSamples) < 1600, `sound for the speech's length: it ends at ${end}, the speech at ${speechSamples}`);
    assert.ok(rms(left, { to: speechSamples }) > 1e-2, 'sound while it speaks');
    assert.ok(rms(left, { from: speechSamples + 1600 }) < 1e-3, 'silence after the speech');
    assert.ok(r > 0.9, `the mp4's audio is the speech (AAC of a noise-like demo speech): r ${r}`);
  });

  test('multipart POST /api/jobs, audio_mode track with a keyframe: the speech replaces the clip, the same speech', async () => {
    const res = await t.http.post('/api/jobs').set(auth)
      .field('prompt', 'a man talks to the camera').field('seconds', '1').field('res', '352p').field('seed', String(SEED)).field('steps', '2')
      .field('audio_mode', 'track').field('tts_text', TEXT).field('tts_language', 'English')
      .attach('audios', voice, 'voice.wav').attach('images', await pngBytes(200, 120), 'first.png');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual([res.body.mode, res.body.image_count, res.body.frames], ['i2v', 1, 39]);
    const job = await until(t, res.body.id, (j) => j.status === 'done' || j.status === 'failed', 300_000);
    assert.equal(job.status, 'done', JSON.stringify(job));
    const mp4 = decodeAudioTrack(await fetchCheckedMp4(t, job, 39, scratch), 32000, 2);
    assert.ok(first, 'the first test ran');
    const r = correlation(mp4, first, Math.min(mp4.length, first.length));
    console.log(`# tts_text + track mode + 1 keyframe (model loaded): exec_s ${job.exec_s}; audio vs the first job's r ${r.toFixed(6)}`);
    assert.ok(r > 0.99, `the same voice, text and seed speak the same soundtrack: r ${r}`);
  });

  test('with a reference picture on basevid50 by multipart POST /api/jobs: the same speech, <Audio 1> defined as fully_copy', async () => {
    const prompt = 'a man talks to the camera';
    const res = await t.http.post('/api/jobs').set(auth)
      .field('prompt', prompt).field('profile', 'basevid50').field('image_mode', 'reference').field('seconds', '1').field('res', '352p')
      .field('seed', String(SEED)).field('steps', '2').field('tts_text', TEXT).field('tts_language', 'English')
      .attach('audios', voice, 'voice.wav').attach('images', await pngBytes(200, 120), 'face.png');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual([res.body.mode, res.body.image_count, res.body.prompt], ['i2v', 1, prompt]);
    assert.equal(res.body.model_prompt, referencePrompt(prompt, 1, 0, true));
    assert.match(res.body.model_prompt, /\n<Audio 1> is the soundtrack: fully_copy - <Audio 1> is reused 1:1 as the target video's complete final audio track\.\na man talks/);
    const job = await until(t, res.body.id, (j) => j.status === 'done' || j.status === 'failed', 300_000);
    assert.equal(job.status, 'done', JSON.stringify(job));
    const mp4 = decodeAudioTrack(await fetchCheckedMp4(t, job, 39, scratch), 32000, 2);
    assert.ok(first, 'the first test ran');
    const r = correlation(mp4, first, Math.min(mp4.length, first.length));
    console.log(`# tts_text + 1 reference picture (Ref2VA, the speech also an audio reference): exec_s ${job.exec_s}; audio vs the first job's r ${r.toFixed(6)}`);
    assert.ok(r > 0.99, `the same voice, text and seed speak the same soundtrack: r ${r}`);
  });

  // issue 50: a voice without pictures speaks the prompt's quoted dialogue (catalog/dialogue.ts) as the tts_text path
  test('a voice without pictures, fastvid by JSON and fastvid_4step_int8 by multipart: the prompt\'s quoted dialogue is the speech', async () => {
    const prompt = `A man looks into the camera and says "${TEXT}"`;
    const res = await t.http.post('/api/v1/generate').set(auth).send({
      prompt, seconds: 1, res: '352p', seed: SEED, steps: 2, audios: [dataUri('audio/wav', voice)], tts_language: 'English',
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    // the job object shows no tts_text; that the dialogue is what was spoken is the soundtrack check below
    assert.deepEqual([res.body.profile, res.body.mode, res.body.image_count, res.body.prompt], ['fastvid', 't2v', 0, prompt]);
    const mp = await t.http.post('/api/jobs').set(auth)
      .field('prompt', `「${TEXT}」 she says`).field('profile', 'fastvid_4step_int8').field('seconds', '1').field('res', '352p')
      .field('seed', String(SEED)).field('steps', '2').field('tts_language', 'English').attach('audios', voice, 'voice.wav');
    assert.equal(mp.status, 200, JSON.stringify(mp.body));
    assert.deepEqual([mp.body.profile, mp.body.mode], ['fastvid_4step_int8', 't2v']);
    assert.ok(first, 'the first test ran');
    for (const id of [res.body.id, mp.body.id]) {
      const job = await until(t, id, (j) => j.status === 'done' || j.status === 'failed', 300_000);
      assert.equal(job.status, 'done', JSON.stringify(job));
      const mp4 = decodeAudioTrack(await fetchCheckedMp4(t, job, 39, scratch), 32000, 2);
      const r = correlation(mp4, first, Math.min(mp4.length, first.length));
      console.log(`# a voice alone on ${job.profile}: exec_s ${job.exec_s}; audio vs the tts_text job's r ${r.toFixed(6)}`);
      assert.ok(r > 0.99, `${job.profile}: the dialogue in the same voice and seed is the same soundtrack: r ${r}`);
    }
    // the speech model's 3 s voice minimum, said as what it is here
    const short = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'He says "hi"', seconds: 1, res: '352p', audios: [dataUri('audio/wav', wavBytes(2.5))] });
    assert.equal(short.status, 400, JSON.stringify(short.body));
    assert.match(short.body.detail, /^audios\[0\]: the voice that speaks the prompt's dialogue \(no pictures: the speech model speaks it\) is 2\.50 s long; a voice clip must be 3 to 15 s$/);
  });

  // issue 45: a voice saved once (POST /v1/audio/voices) in place of audios[0], on Kiln's own JSON and multipart forms
  test('voice: a saved voice in place of audios[0] speaks the same soundtrack (JSON and multipart); 400s name what to change', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: `${t.url}/v1`, maxRetries: 0 });
    const saved = await client.audio.voices.create({ audio_sample: await toFile(voice, 'voice.wav', { type: 'audio/wav' }), name: 'host', consent: 'c' });
    const res = await t.http.post('/api/v1/generate').set(auth).send({
      prompt: 'a man talks to the camera', seconds: 1, res: '352p', seed: SEED, steps: 2, voice: 'host', tts_text: TEXT, tts_language: 'English',
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const mp = await t.http.post('/api/jobs').set(auth)
      .field('prompt', 'a man talks to the camera').field('seconds', '1').field('res', '352p').field('seed', String(SEED)).field('steps', '2')
      .field('voice', saved.id).field('tts_text', TEXT).field('tts_language', 'English');
    assert.equal(mp.status, 200, JSON.stringify(mp.body));
    assert.ok(first, 'the first test ran');
    for (const id of [res.body.id, mp.body.id]) {
      const job = await until(t, id, (j) => j.status === 'done' || j.status === 'failed', 300_000);
      assert.equal(job.status, 'done', JSON.stringify(job));
      assert.deepEqual([job.mode, job.image_count], ['t2v', 0]);
      const mp4 = decodeAudioTrack(await fetchCheckedMp4(t, job, 39, scratch), 32000, 2);
      const r = correlation(mp4, first, Math.min(mp4.length, first.length));
      const same = mp4.length === first.length && mp4.every((v, i) => v === first![i]);
      console.log(`# tts_text in a saved voice (voice ${id === res.body.id ? 'by name, JSON' : 'by id, multipart'}): exec_s ${job.exec_s}; audio vs the uploaded clip's job r ${r.toFixed(6)}, decoded samples ${same ? 'bit-equal' : 'differ'}`);
      assert.ok(r > 0.99, `the saved voice speaks what its clip uploaded speaks: r ${r}`);
    }
    const before = (await t.http.get('/api/jobs').set(auth)).body.length;
    const cases: [() => any, RegExp][] = [
      [() => t.http.post('/api/v1/generate').set(auth).send({ prompt: 'x', seconds: 1, res: '352p', tts_text: 'hi there', voice: 'nobody' }),
        /^voice "nobody": no saved voice has that id or name; saved voices: host \(voice_\w+\) \(GET \/v1\/audio\/voices lists them; POST \/v1\/audio\/voices/],
      [() => t.http.post('/api/v1/generate').set(auth).send({ prompt: 'x', seconds: 1, res: '352p', tts_text: 'hi there', voice: 'host', audios: [dataUri('audio/wav', voice)] }),
        /^give voice or audios, not both: voice names a saved voice whose clip is audios\[0\] \(1 clip given\)$/],
      [() => t.http.post('/api/jobs').set(auth).field('prompt', 'x').field('seconds', '1').field('res', '352p').field('tts_text', 'hi there').field('voice', 'host').attach('audios', voice, 'v.wav'),
        /^give voice or audios, not both/],
      [async () => t.http.post('/api/jobs').set(auth).field('prompt', 'a man waves').field('seconds', '1').field('res', '352p').field('voice', 'host').attach('images', await pngBytes(200, 120), 'first.png'),
        /^voice: a saved voice stands for audios\[0\] only as the voice the speech model speaks in, and this job has no speech: give tts_text .*; a clip for audio_mode voice goes in audios$/],
    ];
    for (const [send, reason] of cases) {
      const r = await send();
      assert.equal(r.status, 400, `${reason}: ${JSON.stringify(r.body).slice(0, 300)}`);
      assert.match(r.body.detail, reason);
    }
    assert.equal((await t.http.get('/api/jobs').set(auth)).body.length, before, 'no job stored');
  });

  test('refused with a 400 before anything is queued: a 2.5 s voice, 2 clips, no voice, a language', async () => {
    const before = (await t.http.get('/api/jobs').set(auth)).body.length;
    const ok = dataUri('audio/wav', wavBytes(3));
    const cases: [object, RegExp][] = [
      [{ audios: [dataUri('audio/wav', wavBytes(2.5))] }, /^audios\[0\]: the voice for tts_text is 2\.50 s long; a voice clip must be 3 to 15 s$/],
      [{ audios: [ok, ok] }, /^audios: with tts_text, audios\[0\] is the voice the speech is spoken in and the speech is the soundtrack; more clips would be voices \(audio_mode voice\), which a job with a soundtrack does not take: 2 given$/],
      [{}, /^tts_text needs a voice to speak in: give a reference clip as audios\[0\]$/],
      [{ audios: [ok], tts_language: 'Klingon' }, /^unknown tts_language "Klingon"; use one of: Auto, /],
    ];
    for (const [body, reason] of cases) {
      const res = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'x', seconds: 1, res: '352p', tts_text: 'hello there', ...body });
      assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(res.body).slice(0, 300)}`);
      assert.match(res.body.detail, reason);
    }
    assert.equal((await t.http.get('/api/jobs').set(auth)).body.length, before, 'no job stored');
  });
});

// Speech through the real app with the real 'tts' registration (no test pipeline): with no checkpoint in WEIGHTS_DIR
// the service generates the demo Qwen3-TTS checkpoint on the first request and runs the whole model on the engine
// (lavapipe here). /api/config reports it as demo; POST /api/v1/tts and /api/tts answer with a real wav; bad input
// is a 400 with the real pipeline behind the endpoints too. The endpoints have no seed field: two identical requests
// draw two seeds (reproducibility per seed is tested on the pipeline, test/models/qwen3_tts_pipeline.test.ts).
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { auth, startAppOnDemoWeights, TestApp } from './harness';
import { dataUri, wavBytes } from './inputs';

/** The wav's format fields and sample count; throws unless it is a canonical 16-bit PCM file. */
function parseWav(buf: Buffer): { rate: number; channels: number; bits: number; samples: Int16Array } {
  assert.equal(buf.subarray(0, 4).toString(), 'RIFF');
  assert.equal(buf.subarray(8, 16).toString(), 'WAVEfmt ');
  assert.equal(buf.readUInt16LE(20), 1, 'PCM');
  const bytes = buf.readUInt32LE(40);
  assert.equal(buf.length, 44 + bytes);
  const copy = Buffer.from(buf.subarray(44)); // aligned
  return { rate: buf.readUInt32LE(24), channels: buf.readUInt16LE(22), bits: buf.readUInt16LE(34), samples: new Int16Array(copy.buffer, copy.byteOffset, bytes / 2) };
}

describe('speech with the real Qwen3-TTS pipeline (demo weights)', () => {
  let t: TestApp;
  before(async () => {
    t = await startAppOnDemoWeights();
  });
  after(async () => {
    await t.close(true);
  });

  test('/api/config: the tts profile is available on demo weights', async () => {
    const cfg = (await t.http.get('/api/config').set(auth)).body;
    assert.equal(cfg.tts.available, true);
    assert.equal(cfg.tts.weights, 'demo');
    assert.match(cfg.tts.note, /^demo: a tiny random Qwen3-TTS checkpoint .*npm run weights -- pull tts/);
  });

  test('a 3 s clip and a text give 200 and a 24 kHz mono 16-bit wav of whole codec frames', async () => {
    const started = Date.now();
    const res = await t.http.post('/api/v1/tts').set(auth).send({ text: 'Hello there.', language: 'English', ref_audio: dataUri('audio/wav', wavBytes(3)) });
    const ms = Date.now() - started;
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.match(res.body.audio, /^\/out\/tts_\d{8}_\d{6}_\d{4}\.wav$/);
    const file = await t.http.get(res.body.audio).buffer(true);
    assert.equal(file.status, 200);
    const wav = parseWav(file.body);
    assert.deepEqual([wav.rate, wav.channels, wav.bits], [24000, 1, 16]);
    const frames = wav.samples.length / 1920;
    // 12 text units allow at most ceil(12.5 * (3 + 0.3 * 12)) frames (pipeline.ts maxNewTokensFor); eos comes after >= 2
    assert.ok(Number.isInteger(frames) && frames >= 2 && frames <= 83, `${wav.samples.length} samples`);
    assert.ok(wav.samples.some((v) => v !== 0), 'not silence');
    console.log(`# first request (demo generation, load, synthesis): ${ms} ms for ${frames} frames (${(frames * 0.08).toFixed(2)} s of audio)`);

    const cfg = (await t.http.get('/api/config').set(auth)).body;
    assert.match(cfg.tts.note, /^demo: .*\(generated,/, 'the demo checkpoint now exists');
    assert.deepEqual(readdirSync(join(t.dataDir, 'inputs')), [], 'reference clip removed');
    assert.deepEqual(readdirSync(join(t.dataDir, 'out')), [res.body.audio.slice('/out/'.length)], 'no temp file left beside the wav');
  });

  test('multipart with ref_text (in-context cloning) and a language; identical requests draw their own seeds', async () => {
    const send = () => t.http.post('/api/tts').set(auth).field('text', '你好。').field('language', 'Chinese').field('ref_text', 'A tone.').attach('ref_audio', wavBytes(3.2, 24000), 'me.wav');
    const started = Date.now();
    const a = await send();
    const ms = Date.now() - started;
    assert.equal(a.status, 200, JSON.stringify(a.body));
    const b = await send();
    assert.equal(b.status, 200, JSON.stringify(b.body));
    const wa = parseWav((await t.http.get(a.body.audio).buffer(true)).body);
    const wb = parseWav((await t.http.get(b.body.audio).buffer(true)).body);
    for (const w of [wa, wb]) assert.ok(w.samples.length >= 2 * 1920 && [0, 1].includes(w.samples.length % 1920), `${w.samples.length} samples`);
    assert.ok(wa.samples.length !== wb.samples.length || wa.samples.some((v, i) => v !== wb.samples[i]), 'a fresh seed per request');
    console.log(`# ICL request (model loaded): ${ms} ms for ${(wa.samples.length / 24000).toFixed(2)} s of audio`);
  });

  test('400s with the real pipeline: unknown language, clip too short or undecodable, empty text, missing clip', async () => {
    const cases: [() => any, RegExp][] = [
      [() => t.http.post('/api/v1/tts').set(auth).send({ text: 'x', language: 'Latin', ref_audio: dataUri('audio/wav', wavBytes(4)) }), /unknown language "Latin"/],
      [() => t.http.post('/api/v1/tts').set(auth).send({ text: 'x', ref_audio: dataUri('audio/wav', wavBytes(2.5)) }), /ref_audio: clip is 2.50 s long; clips must be 3 to 30 s/],
      [() => t.http.post('/api/tts').set(auth).field('text', 'x').attach('ref_audio', Buffer.from('not audio'), 'a.wav'), /^ref_audio/],
      [() => t.http.post('/api/v1/tts').set(auth).send({ text: '  ', ref_audio: dataUri('audio/wav', wavBytes(4)) }), /^text is empty/],
      [() => t.http.post('/api/tts').set(auth).field('text', 'x'), /ref_audio is required/],
    ];
    for (const [send, reason] of cases) {
      const res = await send();
      assert.equal(res.status, 400, `${reason}: ${JSON.stringify(res.body)}`);
      assert.match(res.body.detail, reason);
    }
    assert.equal(existsSync(join(t.dataDir, 'inputs')) ? readdirSync(join(t.dataDir, 'inputs')).length : 0, 0);
  });
});

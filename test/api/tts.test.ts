import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { auth, startApp, TestApp } from './harness';
import { dataUri, wavBytes } from './inputs';
import { silentSpeech } from './test-pipelines';

describe('speech endpoints', () => {
  test('without a speech pipeline: 503 naming what is missing (after the 400/422 checks)', async () => {
    const t = await startApp({ builtinPipelines: false });
    try {
      let res = await t.http.post('/api/v1/tts').set(auth).send({ text: 'hello', ref_audio: dataUri('audio/wav', wavBytes(4)) });
      assert.equal(res.status, 503);
      assert.match(res.body.detail, /speech synthesis is not available yet: no Qwen3-TTS pipeline/);
      res = await t.http.post('/api/v1/tts').set(auth).send({ text: '', ref_audio: 'x' });
      assert.equal(res.status, 400);
      res = await t.http.post('/api/v1/tts').set(auth).send({ text: 'hi' });
      assert.equal(res.status, 422);
      assert.deepEqual(res.body.detail[0].loc, ['body', 'ref_audio']);
    } finally {
      await t.close(true);
    }
  });

  describe('with a speech pipeline', () => {
    let t: TestApp;
    before(async () => (t = await startApp({ pipelines: [silentSpeech()] })));
    after(() => t.close(true));

    test('JSON and multipart answer {audio: /out/tts_<id>.wav}, served without a token', async () => {
      let res = await t.http.post('/api/v1/tts').set(auth).send({ text: 'hello there', language: 'English', ref_audio: dataUri('audio/wav', wavBytes(3.5)) });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.match(res.body.audio, /^\/out\/tts_\d{8}_\d{6}_\d{4}\.wav$/);
      assert.deepEqual(Object.keys(res.body), ['audio']);
      const wav = await t.http.get(res.body.audio).buffer(true);
      assert.equal(wav.status, 200);
      assert.equal(wav.body.subarray(0, 4).toString(), 'RIFF');
      res = await t.http.post('/api/tts').set(auth).field('text', '你好').field('language', 'Chinese').attach('ref_audio', wavBytes(5), 'me.wav');
      assert.equal(res.status, 200);
      assert.ok(existsSync(join(t.dataDir, 'out', res.body.audio.replace('/out/', ''))));
      assert.equal(existsSync(join(t.dataDir, 'inputs', res.body.audio.replace('/out/', '').replace('.wav', ''))), false, 'reference clip removed after');
    });

    test('400s: clip too short or long, unknown language, missing clip, undecodable audio; a pipeline error is a 503', async () => {
      const cases: [() => any, RegExp][] = [
        [() => t.http.post('/api/v1/tts').set(auth).send({ text: 'x', ref_audio: dataUri('audio/wav', wavBytes(2)) }), /ref_audio: clip is 2.00 s long; clips must be 3 to 30 s/],
        [() => t.http.post('/api/v1/tts').set(auth).send({ text: 'x', ref_audio: dataUri('audio/wav', wavBytes(31)) }), /clips must be 3 to 30 s/],
        [() => t.http.post('/api/v1/tts').set(auth).send({ text: 'x', language: 'Latin', ref_audio: dataUri('audio/wav', wavBytes(4)) }), /unknown language "Latin"/],
        [() => t.http.post('/api/tts').set(auth).field('text', 'x'), /ref_audio is required/],
        [() => t.http.post('/api/tts').set(auth).field('text', 'x').attach('ref_audio', Buffer.from('nope'), 'a.ogg'), /^ref_audio/],
      ];
      for (const [send, reason] of cases) {
        const res = await send();
        assert.equal(res.status, 400, String(reason));
        assert.match(res.body.detail, reason);
      }
      const res = await t.http.post('/api/v1/tts').set(auth).send({ text: 'explode', ref_audio: dataUri('audio/wav', wavBytes(4)) });
      assert.equal(res.status, 503);
      assert.match(res.body.detail, /speech synthesis failed: synthesis broke/);
    });
  });
});

// Saved voices (issue 45) used from Kiln's own speech endpoints: a voice saved through the official `openai` SDK
// (POST /v1/audio/voices) named as `voice` on POST /api/v1/tts (JSON) and POST /api/tts (multipart) in place of
// ref_audio. The worker serves echoSpeech (test-pipelines.ts): its wav is a function of the clip bytes, text, ref_text
// and language it was given, so "the voice's clip reaches the speech model as an upload does" is checked bit for bit
// (the real speech model draws a fresh seed per request; test/api/video-tts.test.ts compares a seeded video's speech).
// And OpenAI's speech with stream_format sse, read by the SDK's own SSE reader: the audio concatenated is the file.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI, { toFile } from 'openai';
import { Stream } from 'openai/streaming';
import { VoiceStore } from '../../src/tts/voices.store';
import { auth, startApp, TOKEN, type TestApp } from './harness';
import { dataUri, wavBytes } from './inputs';
import { echoSpeech, echoSpeechWav } from './test-pipelines';

const TEXT = 'Hello there, this is the saved voice speaking.';

/** OpenAI's speech stream events (the API reference's SpeechAudioDeltaEvent / SpeechAudioDoneEvent; openai 7.60's
 * types do not name them: audio.speech.create answers the raw Response). */
type SpeechStreamEvent =
  | { type: 'speech.audio.delta'; audio: string }
  | { type: 'speech.audio.done'; usage: { input_tokens: number; output_tokens: number; total_tokens: number } };

describe('saved voices on Kiln\'s own speech endpoints', () => {
  let t: TestApp;
  let client: OpenAI;
  const clip = wavBytes(4, 16000, 180);
  let narrator: OpenAI.Audio.Voice;
  let reader: OpenAI.Audio.Voice;
  before(async () => {
    t = await startApp({ pipelines: [echoSpeech()], builtinPipelines: false });
    client = new OpenAI({ apiKey: TOKEN, baseURL: `${t.url}/v1`, maxRetries: 0 });
    narrator = await client.audio.voices.create({ audio_sample: await toFile(clip, 'narrator.wav', { type: 'audio/wav' }), name: 'narrator', consent: 'c1' });
    // ref_text: Kiln's extension, sent by the SDK as one more form field
    const withTranscript = { audio_sample: await toFile(clip, 'reader.wav', { type: 'audio/wav' }), name: 'reader', consent: 'c2', ref_text: 'This is my reference.' };
    reader = await client.audio.voices.create(withTranscript as OpenAI.Audio.VoiceCreateParams);
  });
  after(() => t.close(true));

  const wavOf = async (res: { status: number; body: { audio?: string } }) => {
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const got = await t.http.get(res.body.audio!).buffer(true);
    assert.equal(got.status, 200);
    return got.body as Buffer;
  };

  test('voice in place of ref_audio, by name and by id, JSON and multipart: the same wav as the clip uploaded; its ref_text unless one is given', async () => {
    const want = (ref_text: string) => echoSpeechWav(clip, { text: TEXT, ref_text, language: 'English' });
    const uploaded = await wavOf(await t.http.post('/api/v1/tts').set(auth).send({ text: TEXT, language: 'English', ref_audio: dataUri('audio/wav', clip) }));
    assert.ok(uploaded.equals(want('')), 'the echo of the uploaded clip');
    const byName = await wavOf(await t.http.post('/api/v1/tts').set(auth).send({ text: TEXT, language: 'English', voice: 'narrator' }));
    assert.ok(byName.equals(uploaded), 'voice narrator (JSON): bit-equal to the upload');
    const byId = await wavOf(await t.http.post('/api/tts').set(auth).field('text', TEXT).field('language', 'English').field('voice', narrator.id));
    assert.ok(byId.equals(uploaded), 'voice by id (multipart): bit-equal to the upload');

    // a voice saved with a transcript: it is the ref_text, as if the request had sent it with the clip
    const uploadedWithText = await wavOf(await t.http.post('/api/tts').set(auth).field('text', TEXT).field('language', 'English').field('ref_text', 'This is my reference.').attach('ref_audio', clip, 'me.wav'));
    assert.ok(uploadedWithText.equals(want('This is my reference.')));
    const reading = await wavOf(await t.http.post('/api/v1/tts').set(auth).send({ text: TEXT, language: 'English', voice: reader.id }));
    assert.ok(reading.equals(uploadedWithText), 'the voice\'s stored ref_text reached the speech model');
    const overridden = await wavOf(await t.http.post('/api/tts').set(auth).field('text', TEXT).field('language', 'English').field('voice', 'reader').field('ref_text', 'Other words.'));
    assert.ok(overridden.equals(want('Other words.')), 'the request\'s ref_text wins over the voice\'s');

    // the speech's copy of the clip is gone after, the saved voice is not
    assert.deepEqual(readdirSync(join(t.dataDir, 'inputs')).filter((d) => d.startsWith('tts_')), []);
    assert.equal(readdirSync(join(t.dataDir, 'voices')).length, 4, 'two voices: a clip and a record each');
    assert.ok(existsSync(join(t.dataDir, 'voices', `${narrator.id}.json`)));
  });

  test('400s that say what to change: an unknown voice, voice with ref_audio (JSON and multipart), neither; no clip at all is still the 422 of JSON', async () => {
    const cases: [() => any, RegExp][] = [
      [() => t.http.post('/api/v1/tts').set(auth).send({ text: 'x', voice: 'alloy' }),
        /^voice "alloy": no saved voice has that id or name; saved voices: narrator \(voice_\w+\), reader \(voice_\w+\) \(GET \/v1\/audio\/voices lists them; POST \/v1\/audio\/voices, multipart audio_sample, name and consent, saves one\)$/],
      [() => t.http.post('/api/tts').set(auth).field('text', 'x').field('voice', 'voice_000'), /^voice "voice_000": no saved voice/],
      [() => t.http.post('/api/v1/tts').set(auth).send({ text: 'x', voice: 'narrator', ref_audio: dataUri('audio/wav', clip) }), /^give ref_audio or voice, not both: voice names a saved voice/],
      [() => t.http.post('/api/tts').set(auth).field('text', 'x').field('voice', 'narrator').attach('ref_audio', clip, 'me.wav'), /^give ref_audio or voice, not both/],
      [() => t.http.post('/api/tts').set(auth).field('text', 'x').field('voice', ' '), /^ref_audio is required: a reference clip of 3 to 30 s \(or voice: a saved voice's id or name\)$/],
      [() => t.http.post('/api/v1/tts').set(auth).send({ text: '', voice: 'narrator' }), /^text is empty/],
    ];
    for (const [send, reason] of cases) {
      const res = await send();
      assert.equal(res.status, 400, `${reason}: ${JSON.stringify(res.body)}`);
      assert.match(res.body.detail, reason);
    }
    const res = await t.http.post('/api/v1/tts').set(auth).send({ text: 'x' });
    assert.equal(res.status, 422);
    assert.deepEqual(res.body.detail[0].loc, ['body', 'ref_audio']);
    const typed = await t.http.post('/api/v1/tts').set(auth).send({ text: 'x', voice: 'narrator', ref_audio: 5 });
    assert.equal(typed.status, 422, 'ref_audio is type-checked beside a voice too');
  });

  test('OpenAI speech, stream_format sse: speech.audio.delta events whose audio concatenated is the file, then speech.audio.done with usage', async () => {
    const want = echoSpeechWav(clip, { text: TEXT, ref_text: '', language: 'English' });
    const seconds = (want.length - 44) / 2 / 24000;
    for (const format of ['wav', 'mp3', 'pcm'] as const) {
      const file = Buffer.from(await (await client.audio.speech.create({ model: 'tts', voice: 'narrator', input: TEXT, response_format: format, language: 'English' } as OpenAI.Audio.SpeechCreateParams)).arrayBuffer());
      if (format === 'wav') assert.ok(file.equals(want), 'the plain answer is the speech');
      const res = await client.audio.speech.create({ model: 'gpt-4o-mini-tts', voice: { id: narrator.id }, input: TEXT, response_format: format, stream_format: 'sse', language: 'English' } as OpenAI.Audio.SpeechCreateParams);
      assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
      const events: SpeechStreamEvent[] = [];
      for await (const ev of Stream.fromSSEResponse<SpeechStreamEvent>(res, new AbortController())) events.push(ev);
      const deltas = events.slice(0, -1);
      assert.ok(deltas.length >= 1 && deltas.every((e) => e.type === 'speech.audio.delta'), `${format}: ${events.map((e) => e.type).join(', ')}`);
      const streamed = Buffer.concat(deltas.map((e) => Buffer.from((e as { audio: string }).audio, 'base64')));
      assert.ok(streamed.equals(file), `${format}: the ${deltas.length} deltas' ${streamed.length} bytes are the file's ${file.length}`);
      if (format === 'wav') assert.ok(deltas.length > 1, `a ${file.length}-byte wav comes in several pieces`);
      const done = events.at(-1)!;
      assert.deepEqual(done, { type: 'speech.audio.done', usage: { input_tokens: TEXT.length, output_tokens: Math.ceil(seconds * 12.5), total_tokens: TEXT.length + Math.ceil(seconds * 12.5) } });
      console.log(`# sse ${format}: ${deltas.length} deltas, ${streamed.length} bytes, bit-equal to the plain answer; usage ${JSON.stringify((done as { usage: object }).usage)}`);
    }
    await assert.rejects(client.audio.speech.create({ model: 'tts', voice: 'alloy', input: 'hi', stream_format: 'sse' }), (e: unknown) => e instanceof OpenAI.BadRequestError && /voice "alloy": no saved voice/.test(e.message));
  });
});

test('the voice store keeps save order within a second (ids are random): list is oldest first, a name finds its newest', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-voices-'));
  try {
    const store = new VoiceStore({ dataDir: dir });
    const clip = { label: 'c', name: 'c.wav', data: wavBytes(3) };
    const saved = Array.from({ length: 12 }, (_, i) => store.add(i % 2 ? 'same' : `v${i}`, 'c', clip));
    assert.deepEqual(new VoiceStore({ dataDir: dir }).list().map((v) => v.id), saved.map((v) => v.id));
    assert.equal(store.find('same')?.id, saved[11]!.id);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

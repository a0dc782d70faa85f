// The OpenAI-compatible face (/v1/, issue 45), driven only by the official `openai` npm SDK against the real server on
// the demo weights: models, image generation (b64_json and url, n > 1, OpenAI's model names, output formats), errors
// in OpenAI's shape as the SDK's own error classes, and the jobs it makes visible through Kiln's API.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import { auth, startAppOnDemoWeights, TOKEN, type TestApp } from './harness';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tempoChain } from '../../src/openai/speech.service';
import { VoiceStore } from '../../src/tts/voices.store';
import { probe } from '../media/helpers';
import { pngBytes, pngSize, wavBytes } from './inputs';

/** Kiln's extensions ride along in the body as the SDK sends unknown keys through. */
type Generate = OpenAI.Images.ImageGenerateParamsNonStreaming & { seed?: number; steps?: number };

describe('the OpenAI-compatible face through the official SDK', () => {
  let t: TestApp;
  let client: OpenAI;
  before(async () => {
    t = await startAppOnDemoWeights();
    client = new OpenAI({ apiKey: TOKEN, baseURL: `${t.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await t.close(true);
  });

  const generate = (p: Generate) => client.images.generate(p as OpenAI.Images.ImageGenerateParamsNonStreaming);
  const edit = (p: Omit<OpenAI.Images.ImageEditParamsNonStreaming, 'image'> & { image: unknown; seed?: number; steps?: number }) => client.images.edit(p as OpenAI.Images.ImageEditParamsNonStreaming);
  const png = async (w: number, h: number, name: string) => toFile(await pngBytes(w, h), name, { type: 'image/png' });
  const jobOf = async (match: (j: Record<string, unknown>) => boolean) => {
    const listed = (await t.http.get('/api/jobs').set(auth)).body as Record<string, unknown>[] | { jobs: Record<string, unknown>[] };
    return (Array.isArray(listed) ? listed : listed.jobs).find(match)!;
  };

  test('models: every profile with its kind; one by id; an unknown one is a NotFoundError', async () => {
    const ids: Record<string, string> = {};
    for await (const m of client.models.list()) ids[m.id] = (m as unknown as { kind: string }).kind;
    assert.deepEqual([ids.imgmain, ids.imgart_turbo, ids.fastvid, ids.tts], ['image', 'image', 'video', 'tts']);
    assert.equal((await client.models.retrieve('fastvid')).owned_by, 'kiln');
    await assert.rejects(client.models.retrieve('gpt-5'), (e: unknown) => e instanceof OpenAI.NotFoundError && /no model "gpt-5"; models here: imgmain/.test(e.message));
  });

  test('b64_json: a png of the asked size, made as a Kiln job (t2i, imgmain for dall-e-2) that /api/jobs shows', async () => {
    const r = await generate({ model: 'dall-e-2', prompt: 'a red square on a blue background', size: '256x256', response_format: 'b64_json', seed: 7, steps: 2 });
    assert.equal(r.data!.length, 1);
    const png = Buffer.from(r.data![0]!.b64_json!, 'base64');
    assert.deepEqual(pngSize(png), { width: 256, height: 256 });
    assert.equal((r as unknown as { size: string }).size, '256x256');
    const listed = (await t.http.get('/api/jobs').set(auth)).body as Record<string, unknown>[] | { jobs: Record<string, unknown>[] };
    const job = (Array.isArray(listed) ? listed : listed.jobs).find((j) => j.seed === 7 && j.prompt === 'a red square on a blue background')!;
    assert.deepEqual([job.kind, job.profile, job.mode, job.size, job.status], ['image', 'imgmain', 't2i', '256x256', 'done']);
    const own = await t.http.get(`/api/jobs/${String(job.id)}/image`).set(auth).buffer(true);
    assert.ok((own.body as Buffer).equals(png), 'the same bytes as Kiln\'s own download');
  });

  test('n = 2 with url: two absolute URLs of the finished pngs, consecutive seeds give different pictures; webp as b64_json', async () => {
    const r = await generate({ model: 'imgmain', prompt: 'a yellow circle', n: 2, size: '256x256', response_format: 'url', seed: 40, steps: 2 });
    assert.equal(r.data!.length, 2);
    const bodies = [];
    for (const d of r.data!) {
      assert.match(d.url!, new RegExp(`^${t.url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/out/[\\w-]+\\.png$`));
      const res = await fetch(d.url!);
      assert.equal(res.status, 200);
      bodies.push(Buffer.from(await res.arrayBuffer()));
    }
    assert.ok(!bodies[0]!.equals(bodies[1]!), 'seeds 40 and 41 differ');
    const again = await generate({ model: 'imgmain', prompt: 'a yellow circle', size: '256x256', response_format: 'b64_json', output_format: 'webp', seed: 40, steps: 2 });
    const webp = Buffer.from(again.data![0]!.b64_json!, 'base64');
    const meta = await sharp(webp).metadata();
    assert.deepEqual([meta.format, meta.width, meta.height], ['webp', 256, 256]);
  });

  test('errors come as the SDK\'s classes with Kiln\'s message: bad key, unknown model, a video profile, bad size, n > 10, jpeg as url', async () => {
    const bad = new OpenAI({ apiKey: 'wrong-key-000000', baseURL: `${t.url}/v1`, maxRetries: 0 });
    await assert.rejects(bad.images.generate({ prompt: 'x' }), (e: unknown) => e instanceof OpenAI.AuthenticationError && e.code === 'invalid_api_key');
    await assert.rejects(bad.models.list(), (e: unknown) => e instanceof OpenAI.AuthenticationError);
    const cases: [Generate, RegExp, string | null][] = [
      [{ model: 'sdxl', prompt: 'x' }, /unknown model "sdxl"; image models here: imgmain, imgmain_bf16, imgart_turbo, imgart_turbo_int8 \(and gpt-image-1, .*dall-e-3, which run imgmain\)/, null],
      [{ model: 'fastvid', prompt: 'x' }, /model fastvid makes videos, not images/, null],
      [{ prompt: 'x', size: '100x100' as never }, /size/, null],
      [{ prompt: 'x', n: 11 }, /400 n: n must not be greater than 10/, 'n'],
      [{ prompt: 'x', response_format: 'url', output_format: 'jpeg' }, /output_format jpeg comes only with response_format b64_json/, null],
      [{ prompt: '   ' }, /prompt is empty/, null],
    ];
    for (const [p, message, param] of cases) {
      await assert.rejects(generate(p), (e: unknown) => {
        assert.ok(e instanceof OpenAI.BadRequestError, `${JSON.stringify(p)}: ${String(e)}`);
        assert.match(e.message, message);
        assert.equal(e.type, 'invalid_request_error');
        assert.equal(e.param ?? null, param);
        return true;
      });
    }
  });

  test('edits: one picture (b64_json) or several (image[], url) become Kiln edit jobs of those pictures', async () => {
    const one = await edit({ model: 'gpt-image-1', image: await png(96, 64, 'a.png'), prompt: 'make the sky green', size: '256x256', response_format: 'b64_json', seed: 11, steps: 2 });
    assert.deepEqual(pngSize(Buffer.from(one.data![0]!.b64_json!, 'base64')), { width: 256, height: 256 });
    const a = await jobOf((j) => j.seed === 11 && j.prompt === 'make the sky green');
    assert.deepEqual([a.profile, a.mode, a.image_count, a.status], ['imgmain', 'edit', 1, 'done']);
    const two = await edit({ model: 'imgmain', image: [await png(64, 64, 'a.png'), await png(64, 96, 'b.png')], prompt: 'Picture 1 in the style of Picture 2', size: '256x256', response_format: 'url', seed: 12, steps: 2 });
    assert.match(two.data![0]!.url!, /\/out\/[\w-]+\.png$/);
    const b = await jobOf((j) => j.seed === 12 && j.mode === 'edit');
    assert.deepEqual([b.image_count, b.status], [2, 'done']);
  });

  test('edits refused with a reason: a mask, no picture, a model that does not edit', async () => {
    const cases: [() => Promise<unknown>, RegExp][] = [
      [async () => edit({ image: await png(64, 64, 'a.png'), mask: await png(64, 64, 'm.png'), prompt: 'x', size: '256x256' }), /mask: masks are not supported/],
      [async () => edit({ image: [], prompt: 'x', size: '256x256' }), /image: no picture to edit/],
      [async () => edit({ model: 'imgart_turbo', image: await png(64, 64, 'a.png'), prompt: 'x', size: '256x256' }), /model imgart_turbo takes style references, not pictures to edit; editing models here: imgmain, imgmain_bf16/],
    ];
    for (const [call, message] of cases) {
      await assert.rejects(call(), (e: unknown) => e instanceof OpenAI.BadRequestError && message.test(e.message));
    }
  });

  test('saved voices: create from a clip, list, speak by name or {id} in each format, delete; a fresh store (a restart) finds them', async () => {
    const scratch = mkdtempSync(join(tmpdir(), 'kiln-openai-speech-'));
    try {
      const voice = await client.audio.voices.create({ audio_sample: await toFile(wavBytes(4), 'narrator.wav', { type: 'audio/wav' }), name: 'narrator', consent: 'consent_123' });
      assert.match(voice.id, /^voice_[0-9a-f]{24}$/);
      assert.deepEqual([voice.object, voice.name, voice.type], ['audio.voice', 'narrator', 'audio_sample']);
      const listed = await client.get<{ data: { id: string }[] }>('/audio/voices');
      assert.ok(listed.data.some((v) => v.id === voice.id));
      const want: Record<string, string> = { mp3: 'mp3', opus: 'opus', aac: 'aac', flac: 'flac', wav: 'pcm_s16le' };
      for (const [i, format] of (['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const).entries()) {
        const res = await client.audio.speech.create({ model: i % 2 ? 'tts-1' : 'tts', voice: i % 2 ? { id: voice.id } : 'narrator', input: 'Hello there.', response_format: format });
        const bytes = Buffer.from(await res.arrayBuffer());
        if (format === 'pcm') {
          assert.ok(bytes.length > 4800 && bytes.length % 2 === 0, `pcm: ${bytes.length} bytes of 16-bit samples`);
          continue;
        }
        const file = join(scratch, `speech.${format}`);
        writeFileSync(file, bytes);
        const p = probe(file);
        assert.equal(p.audio?.codec, want[format], `${format}: ${JSON.stringify(p)}`);
        assert.ok(p.durationS > 0.1, `${format}: ${p.durationS} s`);
      }
      const fast = await client.audio.speech.create({ model: 'gpt-4o-mini-tts', voice: 'narrator', input: 'Hello there.', response_format: 'wav', speed: 2 });
      assert.equal(Buffer.from(await fast.arrayBuffer()).subarray(0, 4).toString(), 'RIFF');
      const reopened = new VoiceStore({ dataDir: t.dataDir });
      assert.equal(reopened.find('narrator')?.id, voice.id, 'read back from DATA_DIR/voices by a new store');
      assert.ok(reopened.clip(reopened.find(voice.id)!).data.equals(wavBytes(4)), 'the clip as uploaded');
      const gone = await client.audio.voices.delete(voice.id);
      assert.deepEqual(gone, { id: voice.id, deleted: true, object: 'audio.voice.deleted' });
      await assert.rejects(client.audio.voices.delete(voice.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  test('speech and voices refused with a reason: a built-in OpenAI voice never saved, a model, a too-short clip', async () => {
    const cases: [() => Promise<unknown>, RegExp][] = [
      [() => client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'hi' }), /voice "alloy": no saved voice has that id or name; .*POST \/v1\/audio\/voices/],
      [() => client.audio.speech.create({ model: 'whisper-1', voice: 'alloy', input: 'hi' }), /unknown model "whisper-1"; speech models here: tts/],
      [async () => client.audio.voices.create({ audio_sample: await toFile(wavBytes(1), 'short.wav', { type: 'audio/wav' }), name: 'short', consent: 'c' }), /audio_sample.*(short|at least|3)/],
    ];
    for (const [call, message] of cases) {
      await assert.rejects(call(), (e: unknown) => e instanceof OpenAI.BadRequestError && message.test(e.message));
    }
  });
});

test('speed is ffmpeg atempo stages of 0.5 to 2 that multiply to it', () => {
  assert.equal(tempoChain(1), 'atempo=1');
  assert.equal(tempoChain(0.25), 'atempo=0.5,atempo=0.5');
  assert.equal(tempoChain(3), 'atempo=2,atempo=1.5');
  assert.equal(tempoChain(4), 'atempo=2,atempo=2');
});

// OpenAI's videos API on Kiln (/v1/videos, issue 45), driven only by the official `openai` SDK against the real
// server: create (form, with and without a picture), poll, list in cursor pages, the content's three variants,
// remix, delete (of a running video too) and the refusals, each in OpenAI's error shape. The worker runs test
// pipelines that write a real mp4 (ffmpeg's test pattern), so the variants are made from a real video quickly.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import { snapFrames } from '../../src/catalog';
import { RemixStore } from '../../src/openai/remixes.store';
import { countVideoFrames, probe } from '../media/helpers';
import { makeGate } from './control';
import { auth, startApp, TOKEN, type TestApp } from './harness';
import { dataUri, pngBytes } from './inputs';
import { testPipeline } from './test-pipelines';

type Video = OpenAI.Videos.Video;
/** Kiln's sizes and seconds besides OpenAI's, and its extensions, ride along as the SDK sends what it is given. */
type Create = Omit<OpenAI.Videos.VideoCreateParams, 'size' | 'seconds'> & { size?: string; seconds?: string; seed?: number; steps?: number };

describe('OpenAI videos through the official SDK', () => {
  let t: TestApp;
  let client: OpenAI;
  const gate = makeGate();
  before(async () => {
    t = await startApp({
      builtinPipelines: false,
      pipelines: [
        testPipeline('video', 'fastvid', { stepMs: 1, mp4: true }),
        testPipeline('video', 'fastvid_fast', { gate, mp4: true }),
        testPipeline('video', 'turbo_int8', { fail: 'out of memory on the test GPU' }),
        testPipeline('image', 'imgmain', { stepMs: 1 }),
      ],
    });
    client = new OpenAI({ apiKey: TOKEN, baseURL: `${t.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    gate.openAll();
    await t.close(true);
  });

  const create = (p: Create) => client.videos.create(p as unknown as OpenAI.Videos.VideoCreateParams);
  const settled = async (id: string): Promise<Video> => {
    for (;;) {
      const v = await client.videos.retrieve(id);
      if (v.status === 'completed' || v.status === 'failed') return v;
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const kilnJob = async (id: string) => (await t.http.get(`/api/jobs/${id}`).set(auth)).body as Record<string, unknown>;
  const bytes = async (r: Response) => Buffer.from(await r.arrayBuffer());

  test('create (sora-2, OpenAI size and seconds) -> queued, then completed; the Kiln job behind it; the mp4', async () => {
    const v = await create({ model: 'sora-2', prompt: 'a kite over the sea', size: '1280x720', seconds: '4', seed: 11, steps: 3 });
    assert.deepEqual([v.object, v.status, v.model, v.size, v.seconds, v.progress, v.prompt, v.remixed_from_video_id, v.error], ['video', 'queued', 'fastvid', '1344x768', '4', 0, 'a kite over the sea', null, null]);
    const done = await settled(v.id);
    assert.equal(done.status, 'completed');
    assert.equal(done.progress, 100);
    assert.ok(done.completed_at! >= done.created_at);
    const job = await kilnJob(v.id);
    assert.deepEqual([job.kind, job.profile, job.mode, job.aspect, job.res, job.seconds, job.seed, job.steps], ['video', 'fastvid', 't2v', '16:9', '768p', 4, 11, 3]);
    const mp4 = await bytes(await client.videos.downloadContent(v.id));
    const own = (await t.http.get(`/api/jobs/${v.id}/video`).set(auth).buffer(true)).body as Buffer;
    assert.ok(mp4.equals(own), 'the same bytes as Kiln\'s own download');
    const dir = mkdtempSync(join(tmpdir(), 'kiln-v-'));
    try {
      const file = join(dir, 'v.mp4');
      writeFileSync(file, mp4);
      assert.equal(probe(file).video?.codec, 'h264');
      assert.equal(countVideoFrames(file), snapFrames(4));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the thumbnail (webp, the video\'s aspect) and the spritesheet (jpeg, 4 x 2 frames)', async () => {
    const v = await settled((await create({ prompt: 'a boat', size: '480x864', seconds: '1' })).id);
    const thumb = await sharp(await bytes(await client.videos.downloadContent(v.id, { variant: 'thumbnail' }))).metadata();
    assert.equal(thumb.format, 'webp');
    assert.ok(Math.abs(thumb.width! / thumb.height! - 480 / 864) < 0.05, `${thumb.width}x${thumb.height}`);
    const sheet = await sharp(await bytes(await client.videos.downloadContent(v.id, { variant: 'spritesheet' }))).metadata();
    assert.equal(sheet.format, 'jpeg');
    assert.equal(sheet.width, 4 * 256);
  });

  test('input_reference as a file part: the first frame (Kiln\'s i2v); remix keeps settings and seed, names its source, and survives a restart', async () => {
    const v = await create({ prompt: 'the kite rises', size: '608x352', seconds: '1', input_reference: await toFile(await pngBytes(608, 352), 'kite.png', { type: 'image/png' }) });
    assert.equal((await kilnJob(v.id)).mode, 'i2v');
    await settled(v.id);
    // or as {"image_url"}: the same download rules as Kiln's own images (https or a data URI)
    const byUrl = await create({ prompt: 'the kite rises', size: '608x352', seconds: '1', input_reference: { image_url: dataUri('image/png', await pngBytes(608, 352)) } });
    assert.equal((await kilnJob(byUrl.id)).mode, 'i2v');
    await assert.rejects(client.videos.remix(v.id, { prompt: 'the kite falls' }), (e: unknown) => e instanceof OpenAI.BadRequestError && /made from pictures or clips.*create a new video/.test(e.message));

    const first = await settled((await create({ prompt: 'a red kite', size: '608x352', seconds: '2', seed: 5 })).id);
    const remix = await client.videos.remix(first.id, { prompt: 'a blue kite' });
    assert.deepEqual([remix.status, remix.remixed_from_video_id, remix.prompt, remix.size, remix.seconds], ['queued', first.id, 'a blue kite', '608x352', '2']);
    assert.equal((await kilnJob(remix.id)).seed, 5);
    assert.equal((await client.videos.retrieve(remix.id)).remixed_from_video_id, first.id);
    // the record is durable: a fresh store on the same DATA_DIR (as after a restart) reads it back
    assert.equal(new RemixStore({ dataDir: t.dataDir }).sourceOf(remix.id), first.id);
  });

  test('list: newest first in cursor pages (the SDK\'s auto-pagination), order asc, an unknown cursor', async () => {
    const ids: string[] = [];
    for (const p of ['one', 'two', 'three']) ids.push((await create({ prompt: p, size: '608x352', seconds: '1' })).id);
    const page = await client.videos.list({ limit: 2 });
    assert.deepEqual(page.data.map((v) => v.id), [ids[2], ids[1]]);
    assert.equal(page.has_more, true);
    const all: string[] = [];
    for await (const v of client.videos.list({ limit: 2 })) all.push(v.id);
    assert.deepEqual(all.slice(0, 3), [ids[2], ids[1], ids[0]]);
    assert.equal(new Set(all).size, all.length, 'no video twice');
    const asc: string[] = [];
    for await (const v of client.videos.list({ limit: 5, order: 'asc' })) asc.push(v.id);
    assert.deepEqual(asc, [...all].reverse());
    await assert.rejects(client.videos.list({ after: 'video_nope' }), (e: unknown) => e instanceof OpenAI.BadRequestError && /after: no video "video_nope"/.test(e.message));
    // an image job is no video
    const image = (await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a fox', size: '256x256', steps: 1 })).body as { id: string };
    assert.ok(!all.includes(image.id));
    await assert.rejects(client.videos.retrieve(image.id), (e: unknown) => e instanceof OpenAI.NotFoundError && /is an image job/.test(e.message));
  });

  test('a running video: in_progress with its progress; delete cancels and removes it; a failed one says why', async () => {
    const v = await create({ model: 'fastvid_fast', prompt: 'a slow kite', size: '608x352', seconds: '1', steps: 4 });
    // one step through the gate: 1 of 4 done, the next waiting
    while (gate.waiting === 0) await new Promise((r) => setTimeout(r, 20));
    gate.open();
    while ((await client.videos.retrieve(v.id)).progress < 25) await new Promise((r) => setTimeout(r, 20));
    const running = await client.videos.retrieve(v.id);
    assert.deepEqual([running.status, running.progress], ['in_progress', 25]);
    const t0 = Date.now();
    const del = await client.videos.delete(v.id);
    assert.deepEqual(del, { id: v.id, deleted: true, object: 'video.deleted' });
    assert.ok(Date.now() - t0 < 5_000);
    await assert.rejects(client.videos.retrieve(v.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
    await assert.rejects(client.videos.downloadContent(v.id), (e: unknown) => e instanceof OpenAI.NotFoundError);

    const failed = await settled((await create({ model: 'turbo_int8', prompt: 'a kite', size: '608x352', seconds: '1' })).id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error?.code, 'generation_failed');
    assert.match(failed.error!.message, /out of memory on the test GPU/);
  });

  test('refusals in OpenAI\'s shape, naming what to change, nothing queued', async () => {
    const before = ((await t.http.get('/api/jobs?kind=video&limit=1').set(auth)).body as { total: number }).total;
    const bad = async (p: Create, re: RegExp) => assert.rejects(create(p), (e: unknown) => e instanceof OpenAI.BadRequestError && re.test(e.message));
    await bad({ model: 'imgmain', prompt: 'a kite' }, /model imgmain makes images, not videos; video models here: fastvid/);
    await bad({ model: 'veo-3', prompt: 'a kite' }, /unknown model "veo-3"/);
    await bad({ prompt: 'a kite', size: '1000x1000' }, /size "1000x1000": use one of Kiln's video sizes \(608x352, .*\) or OpenAI's/);
    await bad({ prompt: 'a kite', seconds: 'four' }, /seconds "four": whole seconds/);
    await bad({ prompt: 'a kite', seconds: '99' }, /seconds/);
    await bad({ prompt: 'a kite', input_reference: { file_id: 'file_1' } }, /file_id: Kiln has no files API/);
    await bad({ prompt: 'a kite', input_reference: { image_url: 'https://127.0.0.1/a.png' } }, /input_reference.*127.0.0.1 is a loopback/);
    await bad({ prompt: '  ' }, /prompt is empty/);
    const after = ((await t.http.get('/api/jobs?kind=video&limit=1').set(auth)).body as { total: number }).total;
    assert.equal(after, before, 'no job was made');
    await assert.rejects(client.videos.downloadContent('nope', { variant: 'poster' as 'video' }), (e: unknown) => e instanceof OpenAI.BadRequestError && /variant/.test(e.message));
    await assert.rejects(client.videos.list({ limit: 500 }), (e: unknown) => e instanceof OpenAI.BadRequestError && /limit/.test(e.message));
    await assert.rejects(client.videos.remix('nope', { prompt: 'x' }), (e: unknown) => e instanceof OpenAI.NotFoundError && /no video "nope"/.test(e.message));
  });
});

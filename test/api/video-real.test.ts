// Video through the real app with the real 'video' registrations (no test pipeline): with no checkpoint in WEIGHTS_DIR
// the service generates the demo MiniMax H3 checkpoint at the first job and runs every part of the model on the engine
// (lavapipe here). /api/config reports the six profiles as demo; POST /api/v1/generate and /api/jobs with no images
// give a real mp4 (H.264 at the job's size and frame count, 24 fps, stereo 32 kHz AAC); the same parameters and seed
// give the same file; DELETE interrupts a running job between sampling steps.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { countVideoFrames, probe } from '../media/helpers';
import { auth, startAppOnDemoWeights, TestApp, until } from './harness';

const PROFILES = ['basevid50', 'basevid50_sol', 'fastvid', 'turbo_int8', 'fastvid_4step_int8', 'fastvid_fast'];

describe('video with the real MiniMax H3 pipeline (demo weights)', () => {
  let t: TestApp;
  let scratch: string;
  const files: Record<string, Buffer> = {};
  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'kiln-video-api-'));
    t = await startAppOnDemoWeights();
  });
  after(async () => {
    await t.close(true);
    rmSync(scratch, { recursive: true, force: true });
  });

  /** The job's mp4 from /out, written to a file for the probes. */
  const fetchVideo = async (job: Record<string, any>): Promise<{ path: string; bytes: Buffer }> => {
    const res = await t.http.get(job.video).buffer(true);
    assert.equal(res.status, 200);
    const path = join(scratch, `${job.id}.mp4`);
    writeFileSync(path, res.body);
    return { path, bytes: res.body };
  };

  test('/api/config: the six video profiles are available on demo weights', async () => {
    const cfg = (await t.http.get('/api/config').set(auth)).body;
    for (const name of PROFILES) {
      const p = cfg.profiles.find((x: any) => x.profile === name);
      assert.deepEqual([p.available, p.weights], [true, 'demo'], name);
      assert.match(p.note, /^demo: a tiny random MiniMax H3 checkpoint .*npm run weights -- pull /, name);
    }
  });

  test('POST /api/v1/generate, 1 s at 352p: an H.264 mp4 of the job size and frames with a stereo 32 kHz AAC track, well under two minutes', async () => {
    const started = Date.now();
    const res = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'a drummer on a rooftop says "hello"', seconds: 1, res: '352p', seed: 42, wait: true, timeout: 300 });
    const ms = Date.now() - started;
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const job = res.body;
    assert.equal(job.status, 'done', JSON.stringify(job));
    assert.deepEqual([job.profile, job.size, job.frames, job.steps], ['fastvid', '608x352', 39, 8]);
    assert.ok(ms < 120_000, `${ms} ms`);
    const { path, bytes } = await fetchVideo(job);
    files.first = bytes;
    const p = probe(path);
    assert.equal(p.container, 'mov,mp4,m4a,3gp,3g2,mj2');
    assert.deepEqual([p.video?.codec, p.video?.width, p.video?.height, p.video?.fps], ['h264', 608, 352, 24]);
    assert.equal(countVideoFrames(path), 39);
    assert.deepEqual([p.audio?.codec, p.audio?.sampleRate, p.audio?.layout], ['aac', 32000, 'stereo']);
    assert.ok(Math.abs(p.durationS - 39 / 24) < 0.05, `duration ${p.durationS}`);
    console.log(`# first video job (demo generation, load, 7 forwards, decode, mux): ${ms} ms; exec_s ${job.exec_s}`);
    assert.deepEqual(readdirSync(join(t.dataDir, 'out')), [`${job.id}.mp4`], 'no temp file beside the mp4');
  });

  test('POST /api/jobs (multipart) with the same parameters and seed gives the same file', async () => {
    const started = Date.now();
    const res = await t.http.post('/api/jobs').set(auth)
      .field('prompt', 'a drummer on a rooftop says "hello"').field('seconds', '1').field('res', '352p').field('seed', '42');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const job = await until(t, res.body.id, (j) => j.status === 'done' || j.status === 'failed', 120_000);
    assert.equal(job.status, 'done', JSON.stringify(job));
    console.log(`# second job (model loaded): ${Date.now() - started} ms; exec_s ${job.exec_s}`);
    const { bytes } = await fetchVideo(job);
    assert.ok(files.first, 'the first job ran');
    assert.equal(createHash('sha256').update(bytes).digest('hex'), createHash('sha256').update(files.first).digest('hex'));
  });

  test('DELETE while sampling interrupts the job between steps: failed "interrupted", no output', async () => {
    const res = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'x', seconds: 1, res: '352p', seed: 1, steps: 20 });
    const id = res.body.id;
    await until(t, id, (j) => j.status === 'running' && j.stage === '采样' && j.progress.value >= 1, 120_000);
    assert.deepEqual((await t.http.delete(`/api/jobs/${id}`).set(auth)).body, { id, action: 'interrupted' });
    const job = await until(t, id, (j) => j.status === 'failed', 60_000);
    assert.equal(job.error, 'interrupted');
    assert.ok(!readdirSync(join(t.dataDir, 'out')).some((n) => n.includes(id)), readdirSync(join(t.dataDir, 'out')).join(', '));
  });
});

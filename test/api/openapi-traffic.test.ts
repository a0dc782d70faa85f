// The OpenAPI document against what the service really sends (issue 47, item 10): every documented operation is
// called on a real server, answered and refused (400, 401, 404, 422 and the others it gives), every response is
// recorded at the server and validated against /openapi.json (test/api/openapi-traffic.ts, openapi-backend's
// validator); and the document passes `redocly lint` (@redocly/cli, its recommended rules) with no error.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { auth, startApp, TestApp, TOKEN, until } from './harness';
import { dataUri, pngBytes, wavBytes } from './inputs';
import { Exchange, openapiProblems } from './openapi-traffic';
import { makeGate } from './control';
import { silentSpeech, testPipeline } from './test-pipelines';

type Doc = { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };

describe('the OpenAPI document matches the real traffic of every endpoint', () => {
  let t: TestApp;
  let doc: Doc;
  const traffic: Exchange[] = [];
  const tmp = mkdtempSync(join(tmpdir(), 'kiln-oas-'));
  // holds an imgmain_bf16 job after its first step, whose live preview is then served
  const gate = makeGate();

  before(async () => {
    // a 1 MB body limit: the 413 shape without sending hundreds of MB
    t = await startApp({ builtinPipelines: false, traffic, env: { MAX_BODY_MB: '1' }, pipelines: [testPipeline('video', 'fastvid', { stepMs: 1, mp4: true }), testPipeline('image', 'imgmain', { stepMs: 1 }), testPipeline('image', 'imgmain_bf16', { gate, previews: true }), silentSpeech()] });
    doc = (await (await fetch(`${t.url}/openapi.json`)).json()) as Doc;
  });
  after(async () => {
    gate.openAll();
    await t.close(true);
    rmSync(tmp, { recursive: true, force: true });
  });

  test('every endpoint answered, and refused with each of its error statuses', { timeout: 120_000 }, async () => {
    const png = await pngBytes(64, 48);
    const wav = wavBytes(3);
    const get = (p: string) => t.http.get(p).set(auth);
    // a running job's live preview (it waits after step 1 until the preview was read)
    const held = (await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a preview', profile: 'imgmain_bf16', size: '256x256', steps: 3 })).body;
    await until(t, held.id, (j) => j.status === 'running');
    await new Promise<void>((resolve) => {
      const wait = setInterval(() => gate.waiting > 0 && (clearInterval(wait), resolve()), 20);
    });
    gate.open();
    for (let i = 0; i < 500 && (await get(`/api/jobs/${held.id}/preview`)).status !== 200; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal((await get(`/api/jobs/${held.id}/preview`)).status, 200);
    gate.openAll();
    // creates, JSON and multipart
    // the OpenAI-compatible face (its errors: test/api/openai)
    assert.equal((await get('/v1/models')).status, 200);
    assert.equal((await get('/v1/models/imgmain')).status, 200);
    assert.equal((await t.http.post('/v1/images/generations').set(auth).send({ prompt: 'a kite', size: '256x256', response_format: 'url' })).status, 200);
    assert.equal((await t.http.post('/v1/images/edits').set(auth).field('prompt', 'a kite').field('size', '256x256').field('response_format', 'url').attach('image', png, 'a.png')).status, 200);
    const voice = await t.http.post('/v1/audio/voices').set(auth).field('name', 'narrator').field('consent', 'c1').attach('audio_sample', wav, 'v.wav');
    assert.equal(voice.status, 200, JSON.stringify(voice.body));
    assert.equal((await get('/v1/audio/voices')).status, 200);
    assert.equal((await t.http.post('/v1/audio/speech').set(auth).send({ model: 'tts-1', voice: 'narrator', input: 'hello', response_format: 'wav' })).status, 200);
    // refused as JSON although the answer is audio (the document gave the audio types to the errors too)
    assert.equal((await t.http.post('/v1/audio/speech').set(auth).send({ model: 'tts-1', voice: 'nobody', input: 'hello' })).status, 400);
    assert.equal((await t.http.delete(`/v1/audio/voices/${String(voice.body.id)}`).set(auth)).status, 200);
    const video = (await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'a kite', seconds: 1, res: '352p' })).body;
    const videoForm = await t.http.post('/api/jobs').set(auth).field('prompt', 'a kite').field('seconds', '1').field('res', '352p').attach('images', png, 'a.png');
    assert.equal(videoForm.status, 200, JSON.stringify(videoForm.body));
    const image = (await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a fox', size: '256x256', steps: 2 })).body;
    // dry runs: the job's plan in place of the job (src/plan/planner.ts; what they answer: test/api/dry-run)
    const imagePlan = await t.http.post('/api/v1/image').set(auth).send({ prompt: 'a fox', size: '256x256', steps: 2, dry_run: true });
    assert.equal(imagePlan.status, 200, JSON.stringify(imagePlan.body));
    assert.equal(imagePlan.body.dry_run, true);
    const videoPlan = await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'a kite', seconds: 1, res: '352p', dry_run: true });
    assert.equal(videoPlan.status, 200, JSON.stringify(videoPlan.body));
    assert.equal(videoPlan.body.dry_run, true);
    const speechPlan = await t.http.post('/api/v1/tts').set(auth).send({ text: 'hello there', ref_audio: dataUri('audio/wav', wav), dry_run: true });
    assert.equal(speechPlan.status, 200, JSON.stringify(speechPlan.body));
    assert.equal(speechPlan.body.dry_run, true);
    assert.equal((await t.http.post('/api/images').set(auth).field('prompt', 'a fox').field('size', '256x256').attach('images', png, 'a.png')).status, 200);
    const speech = await t.http.post('/api/v1/tts').set(auth).send({ text: 'hello there', ref_audio: dataUri('audio/wav', wav) });
    assert.equal(speech.status, 200, JSON.stringify(speech.body));
    assert.equal((await t.http.post('/api/tts').set(auth).field('text', 'hello').attach('ref_audio', wav, 'r.wav')).status, 200);
    // reads while the jobs run and after
    await get('/api/jobs?limit=5');
    await get(`/api/jobs/${image.id}`);
    await until(t, image.id, (j) => j.status === 'done');
    await until(t, video.id, (j) => j.status === 'done', 30_000);
    assert.equal((await get(`/api/jobs/${video.id}?wait=true&timeout=5`)).status, 200);
    assert.equal((await get(`/api/jobs/${image.id}/image`)).status, 200);
    assert.equal((await get(`/api/jobs/${video.id}/video`)).status, 200);
    // OpenAI's videos (what they do: test/api/openai-videos)
    const sora = await t.http.post('/v1/videos').set(auth).field('prompt', 'a kite').field('seconds', '1').field('size', '608x352');
    assert.equal(sora.status, 200, JSON.stringify(sora.body));
    await until(t, sora.body.id, (j) => j.status === 'done', 30_000);
    for (const p of ['/v1/videos?limit=1', `/v1/videos/${sora.body.id}`, `/v1/videos/${sora.body.id}/content`, `/v1/videos/${sora.body.id}/content?variant=spritesheet`]) assert.equal((await get(p)).status, 200, p);
    assert.equal((await get('/v1/videos/video_nope/content')).status, 404);
    const remix = await t.http.post(`/v1/videos/${sora.body.id}/remix`).set(auth).send({ prompt: 'a red kite' });
    assert.equal(remix.status, 200, JSON.stringify(remix.body));
    assert.equal((await t.http.delete(`/v1/videos/${remix.body.id}`).set(auth)).status, 200);
    for (const p of [`/out/${image.id}.png`, `/out/${video.id}.mp4`, speech.body.audio]) assert.equal((await t.http.get(p)).status, 200, p);
    assert.equal((await t.http.get(`/out/${video.id}.mp4`).set('Range', 'bytes=0-9')).status, 206);
    const beyond = await t.http.get(`/out/${video.id}.mp4`).set('Range', 'bytes=99999999-');
    assert.equal(beyond.status, 416);
    assert.match(String(beyond.headers['content-range']), /^bytes \*\/\d+$/);
    for (const p of ['/api/status', '/api/config', '/api/health', '/metrics', '/']) assert.equal((await get(p)).status, 200, p);
    // event streams: a finished job's ends by itself; the all-jobs stream is read for a moment, then left
    assert.equal((await fetch(`${t.url}/api/jobs/${image.id}/events?token=${TOKEN}`).then(async (r) => (await r.text(), r))).status, 200);
    const ac = new AbortController();
    const all = await fetch(`${t.url}/api/events?token=${TOKEN}`, { signal: ac.signal });
    assert.equal(all.status, 200);
    ac.abort();
    assert.equal((await t.http.delete(`/api/jobs/${image.id}`).set(auth)).status, 200);

    // the refusals: 401 everywhere the token is needed, and the 400/404/409/413/415/422 shapes
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [m, o] of Object.entries(ops)) {
        if (!o.responses['401']) continue;
        const res = await (t.http as any)[m](path.replace('{job_id}', video.id));
        assert.equal(res.status, 401, `${m} ${path}`);
      }
    }
    const refusals: [() => Promise<{ status: number }>, number][] = [
      [() => t.http.post('/api/v1/generate').set(auth).send({ prompt: ' ' }), 400],
      [() => t.http.post('/api/v1/generate').set(auth).send({ prompt: 'a', seconds: 'five' }), 422],
      [() => t.http.post('/api/v1/generate').set(auth).send({ seconds: 5 }), 422], // input: null (missing field)
      [() => t.http.post('/api/v1/generate').set(auth).send({ prompt: 'a', seconds: 99 }), 400],
      [() => t.http.post('/api/v1/generate').set(auth).set('Content-Type', 'application/json').send('{"prompt":'), 422],
      [() => t.http.post('/api/v1/generate').set(auth).send([1, 2]), 422], // input: an array
      [() => t.http.post('/api/v1/generate').set(auth).send({ prompt: 'a', seed: 1.5 }), 422], // input: a number
      [() => t.http.post('/api/v1/generate').set(auth).send({ prompt: 'a', images: ['x', 7] }), 422],
      [() => t.http.post('/api/jobs').set(auth).field('prompt', 'a').field('res', '9000p'), 400],
      [() => t.http.post('/api/jobs').set(auth).field('prompt', 'a').field('seconds', 'five'), 422],
      [() => t.http.post('/api/v1/image').set(auth).send({ prompt: 'a', aspect: '7:1' }), 400],
      [() => t.http.post('/api/v1/image').set(auth).send({ prompt: 'a', aspect: '7:1', dry_run: true }), 400],
      [() => t.http.post('/api/v1/generate').set(auth).send({ prompt: 'a', seconds: 99, dry_run: true }), 400],
      [() => t.http.post('/api/v1/image').set(auth).send({ prompt: 'a', steps: 'many' }), 422],
      [() => t.http.post('/api/v1/image').set(auth).send({ prompt: '   ', size: '300x300' }), 400],
      [() => t.http.post('/api/images').set(auth).field('prompt', ''), 400],
      [() => t.http.post('/api/images').set(auth).field('prompt', 'a').field('cfg', 'high'), 422],
      [() => t.http.post('/api/v1/tts').set(auth).send({ text: 'hi', ref_audio: 'data:audio/wav;base64,AAAA', language: 'Klingon' }), 400],
      [() => t.http.post('/api/v1/tts').set(auth).send({ text: 5, ref_audio: 'x' }), 422],
      [() => t.http.post('/api/tts').set(auth).field('text', 'hi').field('language', 'Klingon').attach('ref_audio', png, 'a.wav'), 400],
      [() => get('/api/jobs?limit=5000'), 400],
      [() => get('/api/jobs?limit=many'), 422],
      [() => get('/api/jobs/nope'), 404],
      [() => get('/api/jobs/nope?wait=true&timeout=5000'), 400],
      [() => get('/api/jobs/nope?wait=maybe'), 422],
      [() => get('/api/jobs/nope/video'), 404],
      [() => get(`/api/jobs/${image.id}/video`), 404],
      [() => get('/api/jobs/nope/image'), 404],
      [() => get('/api/jobs/nope/preview'), 404],
      [() => get('/api/jobs/nope/events'), 404],
      [() => get('/api/events?after=-4'), 422],
      [() => get('/api/events?after=x'), 422],
      [() => t.http.delete('/api/jobs/nope').set(auth), 404],
      [() => t.http.get('/out/nope.png'), 404],
      [() => t.http.post('/api/v1/image').set(auth).send({ prompt: 'x'.repeat(1_100_000) }), 413],
      [() => t.http.post('/api/v1/tts').set(auth).set('Content-Encoding', 'gzip').set('Content-Type', 'application/json').send('{}'), 415],
      [() => t.http.post('/api/jobs').set(auth).set('Content-Type', 'multipart/mixed; boundary=x').send('--x--'), 415],
      [() => t.http.post('/api/v1/image').set(auth).set('Idempotency-Key', 'k1').send({ prompt: 'one', size: '256x256' }), 200],
      [() => t.http.post('/api/v1/image').set(auth).set('Idempotency-Key', 'k1').send({ prompt: 'two', size: '256x256' }), 409],
    ];
    for (const [send, want] of refusals) {
      const res = (await send()) as { status: number; body?: unknown };
      assert.equal(res.status, want, JSON.stringify(res.body));
    }
  });

  test('every documented operation was called, and every response is as documented', async () => {
    const seen = new Set(traffic.filter((x) => x.status < 300).map((x) => `${x.method.toLowerCase()} ${x.path}`));
    const templ = (p: string) => new RegExp(`^${p.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    const missed = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).filter((m) => ![...seen].some((s) => s.startsWith(`${m} `) && templ(p).test(s.slice(m.length + 1)))).map((m) => `${m} ${p}`));
    assert.deepEqual(missed, [], 'operations the traffic never answered with 2xx');
    for (const code of [400, 401, 404, 409, 413, 415, 422]) assert.ok(traffic.some((x) => x.status === code), `a ${code} was sent`);
    assert.deepEqual(await openapiProblems(doc, traffic), []);
  });

  test('redocly lint (@redocly/cli, recommended rules): no error', () => {
    const file = join(tmp, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    const bin = join(process.cwd(), 'node_modules', '.bin', 'redocly'); // the test runner's cwd is the repository
    // telemetry and the update check off: the test must not reach the network
    const r = spawnSync(bin, ['lint', '--format=json', file], { encoding: 'utf8', env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' }, timeout: 60_000 });
    const json = r.stdout.slice(r.stdout.indexOf('{'));
    const report = JSON.parse(json) as { totals: { errors: number; warnings: number }; problems: { ruleId: string; severity: string; message: string; location: { pointer: string }[] }[] };
    const errors = report.problems.filter((p) => p.severity === 'error').map((p) => `${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`);
    assert.deepEqual(errors, []);
    assert.equal(r.status, 0, r.stderr);
    // the warnings left, each on purpose: no license to name (the project is unlicensed), and the page at GET / has
    // no error answer to document
    const warnings = report.problems.map((p) => `${p.ruleId} ${p.location[0]?.pointer}`).sort();
    assert.deepEqual(warnings, ['info-license #/info', 'operation-4xx-response #/paths/~1/get/responses']);
  });
});

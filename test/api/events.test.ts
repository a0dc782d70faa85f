// Live job events (issue 14): GET /api/jobs/{id}/events and GET /api/events as server-sent events. A job's stream
// carries queued, running, stage, progress and its end, which closes it; ids count each job's events; Last-Event-ID
// or ?after=N resume without gaps or duplicates, across a restart too; queued jobs hear their place move; a comment
// keeps the stream alive.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeGate } from './control';
import { auth, startApp, TestApp, TOKEN, until } from './harness';
import { readEvents as read, type Sse } from './sse';
import { testPipeline } from './test-pipelines';

const streamUrl = (t: TestApp, path: string) => `${t.url}${path}${path.includes('?') ? '&' : '?'}token=${TOKEN}`;

describe('live job events', () => {
  let t: TestApp;
  const gate = makeGate(true);
  before(async () => (t = await startApp({ builtinPipelines: false, env: { SSE_HEARTBEAT_S: '1' }, pipelines: [testPipeline('image', 'imgmain', { gate, stepMs: 5 })] })));
  after(async () => {
    gate.openAll();
    await t.close(true);
  });
  const post = (body: object = {}) => t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', steps: 3, ...body });

  test("a job's stream: queued, running, stages and progress, then done with the job object, which ends it; ids count 1, 2, 3...", async () => {
    const job = (await post()).body;
    const s = await read(streamUrl(t, `/api/jobs/${job.id}/events`));
    assert.equal(s.status, 200);
    assert.ok(s.ended, 'the terminal event ends the stream');
    const types = s.events.map((e) => e.event);
    assert.deepEqual([types[0], types[1], types.at(-1)], ['queued', 'running', 'done']);
    assert.ok(types.includes('stage') && types.includes('progress'), types.join(','));
    assert.deepEqual(s.events.map((e) => e.id), s.events.map((_, i) => i + 1));
    assert.deepEqual([s.events[0].data.id, s.events[0].data.status], [job.id, 'queued']);
    const done = s.events.at(-1)!.data;
    assert.deepEqual([done.status, done.image], ['done', `/out/${job.id}.png`]);
    const progress = s.events.filter((e) => e.event === 'progress').map((e) => e.data);
    assert.deepEqual(progress.at(-1).progress, { value: 3, max: 3 });
    assert.ok(progress.every((p) => p.id === job.id && p.status === 'running' && typeof p.stage === 'string'));
    // Before the first step a delta shows the job's own step count as the max, as the job object does (a stage event
    // sent "0 of 0", and the page showed "Step 0 of 0": the page test's CI failure on 2026-11-27).
    const deltas = s.events.filter((e) => e.event === 'stage' || e.event === 'progress').map((e) => e.data.progress);
    assert.ok(deltas.every((p) => p.max === 3), JSON.stringify(deltas));
  });

  test('Last-Event-ID or ?after=N resumes after that event, without gaps or duplicates', async () => {
    const job = (await post()).body;
    const all = await read(streamUrl(t, `/api/jobs/${job.id}/events`));
    const n = all.events.length;
    const byHeader = await read(streamUrl(t, `/api/jobs/${job.id}/events`), { headers: { 'Last-Event-ID': '2' } });
    assert.deepEqual(byHeader.events.map((e) => e.id), all.events.slice(2).map((e) => e.id));
    const byQuery = await read(streamUrl(t, `/api/jobs/${job.id}/events?after=${n - 1}`));
    assert.deepEqual(byQuery.events.map((e) => [e.id, e.event]), [[n, 'done']]);
    // a live stream picked up mid-job sees every later event once
    gate.close();
    const held = (await post()).body;
    await until(t, held.id, (j) => j.stage === '采样');
    const first = await read(streamUrl(t, `/api/jobs/${held.id}/events`), { stop: (evs) => evs.some((e) => e.event === 'stage' && e.data.stage === '采样') });
    const resumeAt = first.events.at(-1)!.id!;
    const rest = read(streamUrl(t, `/api/jobs/${held.id}/events`), { headers: { 'Last-Event-ID': String(resumeAt) } });
    await new Promise((r) => setTimeout(r, 100));
    gate.openAll();
    const tail = await rest;
    const ids = [...first.events, ...tail.events].map((e) => e.id);
    assert.deepEqual(ids, ids.map((_, i) => i + 1), 'contiguous ids across the reconnect');
    assert.equal(tail.events.at(-1)!.event, 'done');
  });

  test("queued jobs hear their place move (an event without an id); GET /api/events carries every job's events", async () => {
    gate.close();
    const running = (await post()).body;
    await until(t, running.id, (j) => j.status === 'running');
    const queued = (await post()).body;
    const dashboard = read(streamUrl(t, '/api/events'), { stop: (evs) => evs.some((e) => e.event === 'done' && e.data.id === queued.id) });
    const mine = read(streamUrl(t, `/api/jobs/${queued.id}/events`), { stop: (evs) => evs.some((e) => e.event === 'running') });
    await new Promise((r) => setTimeout(r, 200));
    gate.openAll();
    const m = await mine;
    const moves = m.events.filter((e) => e.event === 'queued' && e.id === undefined);
    assert.ok(moves.length >= 1, JSON.stringify(m.events.map((e) => e.event)));
    assert.deepEqual(Object.keys(moves[0].data).sort(), ['eta_s', 'id', 'position', 'status']);
    const d = await dashboard;
    const seen = new Set(d.events.map((e) => e.data.id));
    assert.ok(seen.has(running.id) && seen.has(queued.id), 'both jobs on the global stream');
    const seqs = d.events.map((e) => e.id!);
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), 'global ids increase');
    // resuming the global stream replays what came after the given id
    const replay = await read(streamUrl(t, `/api/events?after=${seqs[0]}`), { stop: (evs) => evs.length >= seqs.length - 1 });
    assert.deepEqual(replay.events.slice(0, seqs.length - 1).map((e) => e.id), seqs.slice(1));
  });

  test('a comment line keeps the stream alive (SSE_HEARTBEAT_S); errors before the stream are JSON', async () => {
    gate.close();
    const job = (await post()).body;
    const s = await read(streamUrl(t, `/api/jobs/${job.id}/events`), { timeoutMs: 2600 });
    assert.ok(s.comments >= 2, `${s.comments} heartbeat comments in 2.6 s`);
    gate.openAll();
    assert.deepEqual((await read(streamUrl(t, '/api/jobs/19990101_000000_0000/events'))).body, { detail: 'job 19990101_000000_0000 not found' });
    const bad = await read(streamUrl(t, `/api/jobs/${job.id}/events`), { headers: { 'Last-Event-ID': 'abc' } });
    assert.equal(bad.status, 400);
    assert.equal((await read(`${t.url}/api/events`)).status, 401, 'the token is needed, in the query for EventSource');
  });
});

describe('live job events survive a restart', () => {
  test("a finished job's stream replays its stored events after a restart, and ends", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kiln-events-'));
    try {
      const first = await startApp({ dataDir: dir, builtinPipelines: false, pipelines: [testPipeline('image', 'imgmain')] });
      const job = (await first.http.post('/api/v1/image').set(auth).send({ prompt: 'x', steps: 2, wait: true })).body;
      const before = await read(streamUrl(first, `/api/jobs/${job.id}/events`));
      await first.close();
      const second = await startApp({ dataDir: dir, env: { WORKERS: 'none' } });
      const after = await read(streamUrl(second, `/api/jobs/${job.id}/events`));
      assert.deepEqual(after.events.map((e) => [e.id, e.event]), before.events.map((e) => [e.id, e.event]));
      assert.ok(after.ended);
      await second.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

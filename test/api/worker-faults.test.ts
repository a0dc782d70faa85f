// Faults in the GPU worker cost one job, never the service: test pipelines inside the real worker process crash
// mid-job (process.abort(), SIGKILL of the worker, an error thrown from a callback), ignore their cancel signal,
// outlive MAX_JOB_S or block the worker's event loop. Each time the job ends failed with the reason, the API keeps
// answering, /api/health tells what happened, the worker is restarted and the next job is done.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { makeGate } from './control';
import { auth, startApp, TestApp, until } from './harness';
import { testPipeline } from './test-pipelines';

const post = (t: TestApp, body: object, path = '/api/v1/image') => t.http.post(path).set(auth).send(body);

/** Posts a job (an image, unless `path` says otherwise), waits for it to end, returns it. */
async function runJob(t: TestApp, body: object, path?: string): Promise<Record<string, any>> {
  const created = await post(t, body, path);
  assert.equal(created.status, 200, JSON.stringify(created.body));
  return until(t, created.body.id, (j) => j.status === 'done' || j.status === 'failed', 30_000);
}

/** The API answers while the worker is down: a status request right after a crash takes well under a second. */
async function apiAnswers(t: TestApp): Promise<void> {
  const t0 = Date.now();
  const res = await t.http.get('/api/status').set(auth);
  assert.equal(res.status, 200);
  assert.ok(Date.now() - t0 < 1000, `status took ${Date.now() - t0} ms`);
}

async function health(t: TestApp): Promise<Record<string, any>> {
  return (await t.http.get('/api/health').set(auth)).body;
}

describe('GPU worker crashes mid-job', () => {
  let t: TestApp;
  const hold = makeGate();
  before(async () => {
    t = await startApp({
      builtinPipelines: false,
      pipelines: [
        testPipeline('image', 'imgmain', { stepMs: 1 }),
        testPipeline('image', 'imgmain_bf16', { fault: 'abort' }),
        testPipeline('image', 'imgart_turbo', { fault: 'uncaught' }),
        testPipeline('image', 'imgart_turbo_int8', { gate: hold }),
      ],
    });
  });
  after(async () => {
    hold.openAll();
    await t.close(true);
  });

  test('process.abort(): the job fails with the signal and the stage, the next job is done', async () => {
    const pid = (await health(t)).worker.pid;
    const failed = await runJob(t, { prompt: 'x', profile: 'imgmain_bf16', steps: 2 });
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error, 'GPU worker crashed (SIGABRT) while sampling; the job was not finished');
    await apiAnswers(t);
    const next = await runJob(t, { prompt: 'next', steps: 2 });
    assert.equal(next.status, 'done');
    const h = await health(t);
    assert.equal(h.worker.state, 'ready');
    assert.notEqual(h.worker.pid, pid, 'a new worker process');
    assert.ok(h.worker.restarts >= 1);
    assert.match(h.worker.last_exit.reason, /^crashed \(SIGABRT\)/);
  });

  test('an error thrown from a callback: uncaught in the worker, its message in the job error', async () => {
    const failed = await runJob(t, { prompt: 'x', profile: 'imgart_turbo', steps: 2 });
    assert.equal(failed.error, 'GPU worker exited (code 70: uncaught error: boom in a GPU callback) while sampling; the job was not finished');
    assert.equal((await runJob(t, { prompt: 'next', steps: 2 })).status, 'done');
  });

  test('SIGKILL of the worker from outside (an operator): the job fails saying so, not blaming memory; queued jobs run after it', async () => {
    hold.close();
    const held = (await post(t, { prompt: 'held', profile: 'imgart_turbo_int8', steps: 2 })).body;
    const queued = (await post(t, { prompt: 'queued', steps: 2 })).body;
    await until(t, held.id, (j) => j.stage === '采样');
    while (hold.waiting === 0) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 1200)); // a heartbeat (every second) with the worker's memory figures
    const pid = (await health(t)).worker.pid;
    process.kill(pid, 'SIGKILL');
    const failed = await until(t, held.id, (j) => j.status === 'failed');
    // the worker's heartbeats showed its memory far from any limit: the signal is named, memory is not blamed
    assert.equal(failed.error, 'GPU worker was killed (SIGKILL, not sent by Kiln; its memory was not near a limit when last seen) while sampling; the job was not finished');
    assert.equal((await health(t)).worker.last_exit.reason, 'was killed (SIGKILL, not sent by Kiln; its memory was not near a limit when last seen)');
    await apiAnswers(t);
    assert.equal((await until(t, queued.id, (j) => j.status === 'done', 30_000)).status, 'done');
  });
});

describe('GPU worker watchdog: DELETE grace, MAX_JOB_S, heartbeats', () => {
  let t: TestApp;
  before(async () => {
    t = await startApp({
      builtinPipelines: false,
      env: { INTERRUPT_GRACE_S: '1', MAX_JOB_S: 'image=3,video=600', WORKER_STALL_S: '3', WORKER_BUSY_S: '8' },
      pipelines: [
        testPipeline('image', 'imgmain', { stepMs: 1 }),
        testPipeline('image', 'imgmain_bf16', { fault: 'ignore-cancel' }),
        testPipeline('video', 'fastvid', { fault: 'ignore-cancel' }),
        testPipeline('video', 'turbo_int8', { fault: 'block' }),
        testPipeline('video', 'fastvid_4step_int8', { fault: 'spin' }),
        testPipeline('video', 'fastvid_fast', { busyMs: 5000 }),
      ],
    });
  });
  after(() => t.close(true));

  test('a pipeline that ignores its cancel: DELETE ends it within INTERRUPT_GRACE_S + 2 s, as interrupted', async () => {
    const job = (await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'x', steps: 2 })).body;
    await until(t, job.id, (j) => j.stage === '采样');
    const t0 = Date.now();
    assert.deepEqual((await t.http.delete(`/api/jobs/${job.id}`).set(auth)).body, { id: job.id, action: 'interrupted' });
    const ended = await until(t, job.id, (j) => j.status === 'failed', 5000);
    const took = Date.now() - t0;
    assert.equal(ended.error, 'interrupted');
    assert.ok(took < 3000, `ended ${took} ms after the DELETE`);
    assert.match((await health(t)).worker.last_exit.reason, /did not stop within 1 s of its DELETE/);
    assert.equal((await runJob(t, { prompt: 'next', steps: 2 })).status, 'done');
  });

  test('a job over MAX_JOB_S is killed: failed "timed out after N s"', async () => {
    const t0 = Date.now();
    const failed = await runJob(t, { prompt: 'x', profile: 'imgmain_bf16', steps: 2 });
    assert.equal(failed.error, 'timed out after 3 s');
    assert.ok(Date.now() - t0 < 6000, `${Date.now() - t0} ms`);
    assert.equal((await runJob(t, { prompt: 'next', steps: 2 })).status, 'done');
  });

  test('a worker whose event loop stops in a wait (no heartbeat, no CPU for WORKER_STALL_S) is killed; the job says so', async () => {
    const t0 = Date.now();
    const failed = await runJob(t, { prompt: 'x', profile: 'turbo_int8', steps: 2 }, '/api/v1/generate');
    assert.match(failed.error, /^GPU worker was killed: it stopped answering \(no heartbeat for \d+ s\) while sampling; the job was not finished$/);
    assert.ok(Date.now() - t0 < 7000, `killed after ${Date.now() - t0} ms: the CPU rule held a waiting worker`);
    await apiAnswers(t);
    const h = await health(t);
    assert.deepEqual([h.watchdog.stalled_after_s, h.watchdog.busy_stalled_after_s, h.watchdog.interrupt_grace_s, h.watchdog.max_job_s.image], [3, 8, 1, 3]);
    assert.equal((await runJob(t, { prompt: 'next', steps: 2 })).status, 'done');
  });

  test('a silent worker that uses the CPU (a 5 s synchronous step, as a shader compile on a busy machine) is not killed', async () => {
    const pid = (await health(t)).worker.pid;
    const job = await runJob(t, { prompt: 'x', profile: 'fastvid_fast', steps: 2 }, '/api/v1/generate');
    assert.equal(job.status, 'done', JSON.stringify(job));
    assert.equal((await health(t)).worker.pid, pid);
  });

  test('a worker busy on the CPU and silent past WORKER_BUSY_S is killed; the job says so', async () => {
    const t0 = Date.now();
    const failed = await runJob(t, { prompt: 'x', profile: 'fastvid_4step_int8', steps: 2 }, '/api/v1/generate');
    assert.match(failed.error, /^GPU worker was killed: it stopped answering \(no heartbeat for \d+ s, busy on the CPU all along\) while sampling; the job was not finished$/);
    assert.ok(Date.now() - t0 >= 8000, `killed after ${Date.now() - t0} ms, before WORKER_BUSY_S`);
    assert.equal((await runJob(t, { prompt: 'next', steps: 2 })).status, 'done');
  });
});

describe('WORKERS=none: an API without a GPU', () => {
  let t: TestApp;
  before(async () => (t = await startApp({ env: { WORKERS: 'none' } })));
  after(() => t.close(true));

  test('jobs are accepted and wait; config, health and speech say why', async () => {
    const job = (await post(t, { prompt: 'x', steps: 2 })).body;
    await new Promise((r) => setTimeout(r, 300));
    const j = (await t.http.get(`/api/jobs/${job.id}`).set(auth)).body;
    assert.deepEqual([j.status, j.position], ['queued', 1]);
    const cfg = (await t.http.get('/api/config').set(auth)).body;
    const imgmain = cfg.profiles.find((p: any) => p.profile === 'imgmain');
    assert.equal(imgmain.available, false);
    assert.match(imgmain.note, /no GPU worker on this host \(WORKERS=none\)/);
    const h = await health(t);
    assert.deepEqual([h.worker.mode, h.services.worker, h.gpu.available], ['none', 'none', false]);
    const speech = await t.http.post('/api/v1/tts').set(auth).send({ text: 'hello', ref_audio: 'https://example.com/a.wav' });
    assert.equal(speech.status, 503);
    assert.match(speech.body.detail, /WORKERS=none/);
  });
});

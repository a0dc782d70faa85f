// Restart durability (spec "Durable store"): after a restart, whether the app was closed or the process was
// killed with SIGKILL, done and failed jobs are still listed and downloadable, queued jobs run in their original
// order, and the job that was running is failed with "interrupted by restart".
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { STAGE } from '../../src/catalog';
import { makeGate, makeLog } from './control';
import { startApp, TestApp, TOKEN } from './harness';
import { startServiceProcess } from './service-process';
import { restartPipelines } from './test-pipelines';

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
type Job = Record<string, any>;

/** Plain HTTP against a base URL (an in-process app or the child process alike). */
function client(base: string) {
  const headers = { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' };
  return {
    async get(path: string, withToken = true): Promise<{ status: number; body: any; bytes: Buffer; type: string }> {
      const res = await fetch(base + path, { headers: withToken ? headers : {} });
      const bytes = Buffer.from(await res.arrayBuffer());
      const type = res.headers.get('content-type') ?? '';
      return { status: res.status, bytes, type, body: type.includes('json') ? JSON.parse(bytes.toString()) : undefined };
    },
    async post(path: string, body: object): Promise<Job> {
      const res = await fetch(base + path, { method: 'POST', headers, body: JSON.stringify(body) });
      assert.equal(res.status, 200, `POST ${path}: ${await res.clone().text()}`);
      return (await res.json()) as Job;
    },
  };
}
type Client = ReturnType<typeof client>;

async function until(c: Client, id: string, pred: (j: Job) => boolean, what: string): Promise<Job> {
  const end = Date.now() + 10_000;
  for (;;) {
    const { body } = await c.get(`/api/jobs/${id}`);
    if (pred(body)) return body;
    if (Date.now() > end) throw new Error(`job ${id} never ${what}: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface Seeded {
  done: string;
  doneVideo: string;
  failed: string;
  running: string;
  queued: string[];
}

/** Two done jobs (image, video), one failed, one running (held by `hold` or slow by its step count), three
 * queued behind it (video and image mixed: the order must hold across kinds and profiles). */
async function seed(c: Client, hold: () => void = () => {}): Promise<Seeded> {
  const done = (await c.post('/api/v1/image', { prompt: 'done image', steps: 1, wait: true, timeout: 10 })).id;
  const doneVideo = (await c.post('/api/v1/generate', { prompt: 'done video', steps: 1, seconds: 1, wait: true, timeout: 10 })).id;
  const failed = (await c.post('/api/v1/image', { prompt: 'fails', profile: 'imgart_turbo', steps: 1, wait: true, timeout: 10 })).id;
  hold();
  const running = (await c.post('/api/v1/image', { prompt: 'running at the restart', steps: 200 })).id;
  await until(c, running, (j) => j.status === 'running' && j.stage === STAGE.sample, 'reached sampling');
  const queued = [
    (await c.post('/api/v1/generate', { prompt: 'queued 1', steps: 2, seconds: 1 })).id,
    (await c.post('/api/v1/image', { prompt: 'queued 2', steps: 2 })).id,
    (await c.post('/api/v1/image', { prompt: 'queued 3', steps: 2 })).id,
  ];
  // Preconditions, so a pass after the restart means something.
  assert.equal((await c.get(`/api/jobs/${done}`)).body.status, 'done');
  assert.equal((await c.get(`/api/jobs/${doneVideo}`)).body.status, 'done');
  assert.equal((await c.get(`/api/jobs/${failed}`)).body.status, 'failed');
  assert.equal((await c.get(`/api/jobs/${running}`)).body.status, 'running');
  for (const [i, id] of queued.entries()) assert.equal((await c.get(`/api/jobs/${id}`)).body.position, i + 1);
  return { done, doneVideo, failed, running, queued };
}

/** The three properties, on the app reopened on the same data dir (`log`: its pipelines' events). */
async function checkAfterRestart(c: Client, s: Seeded, log: { events: string[] }): Promise<void> {
  const interrupted = (await c.get(`/api/jobs/${s.running}`)).body;
  assert.equal(interrupted.status, 'failed');
  assert.equal(interrupted.error, 'interrupted by restart');
  assert.equal(typeof interrupted.finished, 'number');

  for (const id of s.queued) {
    const j = (await c.get(`/api/jobs/${id}?wait=true&timeout=10`)).body;
    assert.equal(j.status, 'done', `queued job ${id}: ${JSON.stringify(j)}`);
  }
  const runs = log.events.filter((e) => e.startsWith('run ')).map((e) => e.slice(4));
  assert.deepEqual(runs, s.queued, 'queued jobs run once each, in their original order, and the interrupted one is not rerun');

  const failed = (await c.get(`/api/jobs/${s.failed}`)).body;
  assert.deepEqual([failed.status, failed.error], ['failed', 'test pipeline failure']);
  for (const [id, kind, ext] of [[s.done, 'image', 'png'], [s.doneVideo, 'video', 'mp4']]) {
    const j = (await c.get(`/api/jobs/${id}`)).body;
    assert.equal(j.status, 'done');
    const viaApi = await c.get(`/api/jobs/${id}/${kind}`);
    const viaOut = await c.get(`/out/${id}.${ext}`, false);
    assert.deepEqual([viaApi.status, viaOut.status], [200, 200], `${kind} ${id} downloads`);
    assert.ok(viaApi.bytes.length > 0 && viaApi.bytes.equals(viaOut.bytes));
    if (kind === 'image') assert.deepEqual([...viaApi.bytes.subarray(0, 8)], PNG_SIGNATURE);
  }

  const listed = (await c.get('/api/jobs')).body as Job[];
  const created = [s.done, s.doneVideo, s.failed, s.running, ...s.queued];
  assert.deepEqual(listed.map((j) => j.id), [...created].reverse(), 'every job still listed, newest first');
}

describe('restart durability', () => {
  const dirs: string[] = [];
  const apps: TestApp[] = [];
  const children: ChildProcess[] = [];
  const dataDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'kiln-restart-'));
    dirs.push(d);
    return d;
  };
  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    for (const a of apps) await a.close().catch(() => {});
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test('close the app and reopen it on the same data dir', { timeout: 20_000 }, async () => {
    const dir = dataDir();
    const gate = makeGate(true);
    const first = await startApp({ dataDir: dir, pipelines: restartPipelines({ gate }) });
    apps.push(first);
    const seeded = await seed(client(first.url), () => gate.close());
    await first.close(); // the held job sees its signal fire and stops

    const log = makeLog();
    const second = await startApp({ dataDir: dir, pipelines: restartPipelines({ log }) });
    apps.push(second);
    await checkAfterRestart(client(second.url), seeded, log);
  });

  test('kill -9 the service process while a job runs, then reopen the data dir', { timeout: 20_000 }, async () => {
    const dir = dataDir();
    const service = await startServiceProcess(dir, { env: { LOG_LEVEL: 'silent', STEP_MS: '100' } });
    children.push(service.child);

    // 200 steps of 100 ms: the running job is far from finished when the process dies.
    const seeded = await seed(client(service.url));
    assert.equal(await service.kill(), 'SIGKILL');

    const log = makeLog();
    const reopened = await startApp({ dataDir: dir, pipelines: restartPipelines({ log }) });
    apps.push(reopened);
    await checkAfterRestart(client(reopened.url), seeded, log);
  });
});

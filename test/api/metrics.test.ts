// GET /metrics (issue 14): the Prometheus text format, parsed here with parse-prometheus-text-format (prom-client
// writes it and has no parser; this one folds a labelled histogram's series into one, so those counts are read from
// their _count lines): jobs by kind/profile/status, durations, queue waits and length, model loads, worker
// restarts, GPU memory, callback outcomes and the process metrics. The token is needed unless METRICS_PUBLIC=1.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { auth, startApp, TestApp, until } from './harness';
import { testPipeline } from './test-pipelines';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const parse = require('parse-prometheus-text-format') as (text: string) => { name: string; type: string; metrics: { value?: string; labels?: Record<string, string>; count?: string; buckets?: Record<string, string> }[] }[];

describe('GET /metrics', () => {
  let t: TestApp;
  let hook: http.Server;
  let hookUrl = '';
  before(async () => {
    hook = http.createServer((_req, res) => res.writeHead(204).end());
    await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
    hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
    t = await startApp({
      builtinPipelines: false,
      env: { ALLOW_PRIVATE_URLS: '1' },
      pipelines: [testPipeline('image', 'imgmain'), testPipeline('image', 'imgmain_bf16', { fail: 'boom' }), testPipeline('video', 'fastvid', { fault: 'abort' })],
    });
  });
  after(async () => {
    await t.close(true);
    hook.close();
  });

  let text = '';
  const scrape = async () => {
    const res = await t.http.get('/metrics').set(auth);
    assert.equal(res.status, 200);
    assert.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/);
    text = res.text;
    return new Map(parse(res.text).map((f) => [f.name, f]));
  };
  const histogramCount = (name: string, labels: string) => Number(new RegExp(`^${name}_count\\{${labels}\\} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
  const value = (families: Map<string, any>, name: string, labels: Record<string, string> = {}) =>
    Number(families.get(name)?.metrics.find((m: any) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))?.value ?? NaN);

  test('jobs, durations, waits, loads, restarts, memory, callbacks and the process, as Prometheus parses them', { timeout: 60_000 }, async () => {
    const done = (await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', steps: 2, callback_url: hookUrl })).body;
    await until(t, done.id, (j) => j.callback_status === 204);
    const failed = (await t.http.post('/api/v1/image').set(auth).send({ prompt: 'x', steps: 1, profile: 'imgmain_bf16', wait: true })).body;
    assert.equal(failed.status, 'failed');
    const crashed = (await t.http.post('/api/v1/generate').set(auth).send({ prompt: 'x', steps: 2 })).body;
    await until(t, crashed.id, (j) => j.status === 'failed', 20_000);
    await until(t, (await t.http.post('/api/v1/image').set(auth).send({ prompt: 'after', steps: 1 })).body.id, (j) => j.status === 'done', 20_000);

    const f = await scrape();
    assert.equal(f.get('kiln_jobs_total')?.type, 'COUNTER');
    assert.equal(value(f, 'kiln_jobs_total', { kind: 'image', profile: 'imgmain', status: 'done' }), 2);
    assert.equal(value(f, 'kiln_jobs_total', { kind: 'image', profile: 'imgmain_bf16', status: 'failed' }), 1);
    assert.equal(value(f, 'kiln_jobs_total', { kind: 'video', profile: 'fastvid', status: 'failed' }), 1);
    const duration = f.get('kiln_job_duration_seconds');
    assert.equal(duration?.type, 'HISTOGRAM');
    assert.equal(histogramCount('kiln_job_duration_seconds', 'kind="image",profile="imgmain"'), 2);
    assert.equal(histogramCount('kiln_queue_wait_seconds', 'kind="image",profile="imgmain"'), 2);
    assert.equal(f.get('kiln_queue_wait_seconds')?.type, 'HISTOGRAM');
    assert.equal(value(f, 'kiln_queue_length'), 0);
    assert.ok(value(f, 'kiln_model_loads_total', { profile: 'imgmain' }) >= 2, 'imgmain loaded again after the crash');
    assert.equal(f.get('kiln_model_load_seconds')?.type, 'HISTOGRAM');
    assert.equal(value(f, 'kiln_worker_restarts_total'), 1);
    assert.ok(value(f, 'kiln_gpu_memory_bytes', { state: 'budget' }) > 0);
    assert.ok(value(f, 'kiln_callbacks_total', { outcome: 'delivered' }) >= 1);
    assert.ok(f.has('process_cpu_user_seconds_total') && f.has('nodejs_eventloop_lag_seconds'), 'the default process metrics');
  });

  test('the token is needed', async () => {
    assert.deepEqual((await t.http.get('/metrics')).body, { detail: 'bad token' });
    assert.equal((await t.http.get('/metrics?token=wrong')).status, 401);
  });
});

test('METRICS_PUBLIC=1: /metrics without a token', async () => {
  const t = await startApp({ builtinPipelines: false, env: { METRICS_PUBLIC: '1', WORKERS: 'none' } });
  try {
    const res = await t.http.get('/metrics');
    assert.equal(res.status, 200);
    assert.match(res.text, /# TYPE kiln_queue_length gauge/);
  } finally {
    await t.close(true);
  }
});

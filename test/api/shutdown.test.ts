// Shutdown is prompt while clients wait: Nest closes the HTTP server (which waits for every open request) before
// its onApplicationShutdown hooks run, so a wait=true request or an open event stream once held a SIGTERM for up to
// MAX_WAIT_S (a CI run hung two hours on a test's close). Both are now released before the server closes: the
// waiting request gets the job as it stands, the stream ends.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeGate } from './control';
import { auth, startApp, TOKEN, until } from './harness';
import { testPipeline } from './test-pipelines';

test('close() with a wait=true request and an event stream open returns within seconds; the waiter gets the job', { timeout: 60_000 }, async () => {
  const gate = makeGate();
  const t = await startApp({ builtinPipelines: false, pipelines: [testPipeline('image', 'imgmain', { gate })] });
  let closed = false;
  try {
    const job = (await t.http.post('/api/v1/image').set(auth).send({ prompt: 'held', steps: 2 })).body;
    await until(t, job.id, (j) => j.status === 'running');
    const waiting = fetch(`${t.url}/api/jobs/${job.id}?wait=true&timeout=1800`, { headers: auth }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, any> }));
    const stream = await fetch(`${t.url}/api/jobs/${job.id}/events?token=${TOKEN}`);
    const streamEnded = (async () => {
      const reader = stream.body!.getReader();
      for (;;) if ((await reader.read()).done) return true;
    })().catch(() => true);
    await new Promise((r) => setTimeout(r, 200)); // both are held open by the server now
    const t0 = Date.now();
    const closing = t.close(true).then(() => (closed = true));
    const answer = await waiting;
    assert.equal(answer.status, 200);
    assert.equal(answer.body.id, job.id);
    assert.ok(['running', 'queued', 'failed', 'interrupted'].includes(answer.body.status), JSON.stringify(answer.body));
    assert.equal(await streamEnded, true);
    gate.openAll();
    await closing;
    assert.ok(Date.now() - t0 < 15_000, `close took ${Date.now() - t0} ms`);
  } finally {
    gate.openAll();
    if (!closed) await t.close(true).catch(() => {});
  }
});

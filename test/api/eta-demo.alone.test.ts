// eta_s on a real model (issue 47, item 11): the image model on its demo checkpoint, in the real worker, on this
// machine. After one job of the profile has run (256x256, 8 steps, the first of the worker: shaders compiled, the
// preview projection fitted), a second job of the same class and size is estimated at creation within a factor of
// 1.5 of the time it really took (before: 2.3-5x over, the first run's 22 s projection fit counted as the class's
// work). Then a job of another size and step count (320x320, 12 steps: a class never run) is estimated from that
// measurement scaled by pixels and steps, then by its own progress: half-way through its steps its eta_s is within a
// factor of 1.5 of the time it really had left, and eta_s is never 0 while it runs. (Before: the class's first
// guess, a few seconds for a job of half a minute here, counted down to 0 while the job ran on.)
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { auth, startAppOnDemoWeights, TestApp, until } from './harness';

const BODY = { prompt: 'a red circle on a blue background', size: '256x256', steps: 8, seed: 3 };

describe('eta_s from this machine\'s measurements and the job\'s own progress (imgmain, demo weights)', () => {
  let t: TestApp;
  before(async () => {
    t = await startAppOnDemoWeights();
  });
  after(async () => {
    await t.close(true);
  });

  test('a second job of the class: eta_s at creation within 1.5x of its real time; another size mid-run within 1.5x of the real time left; never 0 while running', { timeout: 600_000 }, async (ctx) => {
    const first = await t.http.post('/api/v1/image').set(auth).send(BODY);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal((await until(t, first.body.id, (j) => j.status === 'done' || j.status === 'failed', 300_000)).status, 'done');

    // a second job of the same class and size: its eta_s at creation against the time it really took from there
    const created = Date.now() / 1000;
    const again = await t.http.post('/api/v1/image').set(auth).send({ ...BODY, seed: 5 });
    const atCreation = again.body.eta_s as number;
    const againDone = await until(t, again.body.id, (j) => j.status === 'done' || j.status === 'failed', 300_000);
    const creationRatio = atCreation / (againDone.finished - created);
    ctx.diagnostic(`same class at creation: eta_s ${atCreation}, really ${(againDone.finished - created).toFixed(2)} s; ratio ${creationRatio.toFixed(2)}; first exec_s ${(await t.http.get(`/api/jobs/${first.body.id}`).set(auth)).body.exec_s}, second exec_s ${againDone.exec_s}`);
    assert.equal(againDone.status, 'done');
    assert.ok(creationRatio <= 1.5 && creationRatio >= 1 / 1.5, `at creation eta_s ${atCreation} s, really ${(againDone.finished - created).toFixed(2)} s (ratio ${creationRatio.toFixed(2)})`);

    const id = (await t.http.post('/api/v1/image').set(auth).send({ ...BODY, size: '320x320', steps: 12, seed: 4 })).body.id as string;
    const seen: { at: number; status: string; eta_s?: number; value: number; max: number }[] = [];
    let done: Record<string, any> | undefined;
    for (const end = Date.now() + 300_000; Date.now() < end; ) {
      const j = (await t.http.get(`/api/jobs/${id}`).set(auth)).body;
      if (j.status === 'done' || j.status === 'failed') {
        done = j;
        break;
      }
      seen.push({ at: Date.now() / 1000, status: j.status, eta_s: j.eta_s, value: j.progress?.value ?? 0, max: j.progress?.max ?? 0 });
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(done?.status, 'done', JSON.stringify(done));
    const running = seen.filter((s) => s.status === 'running');
    assert.ok(running.length > 5, `seen running ${running.length} times`);
    const zero = running.filter((s) => !(typeof s.eta_s === 'number' && s.eta_s > 0));
    assert.deepEqual(zero, [], 'eta_s is more than 0 whenever the job is running');
    // the first look at or past half its steps: what it said against what it really took from there
    const mid = running.find((s) => s.max > 0 && s.value >= s.max / 2);
    assert.ok(mid, `never seen half-way: ${JSON.stringify(running.slice(-3))}`);
    const real = done!.finished - mid.at;
    const ratio = mid.eta_s! / real;
    const start = running[0];
    ctx.diagnostic(`first job ${(await t.http.get(`/api/jobs/${first.body.id}`).set(auth)).body.exec_s} s; this one ${done!.exec_s} s; when it began running eta_s ${start.eta_s}, really ${(done!.finished - start.at).toFixed(2)} s left; at step ${mid.value}/${mid.max} eta_s ${mid.eta_s}, really ${real.toFixed(2)} s left; ratio ${ratio.toFixed(2)}; eta_s while running: ${running.map((s) => s.eta_s).join(' ')}`);
    assert.ok(ratio <= 1.5 && ratio >= 1 / 1.5, `mid-run (step ${mid.value}/${mid.max}) eta_s ${mid.eta_s} s, really ${real.toFixed(2)} s left (ratio ${ratio.toFixed(2)})`);
  });
});

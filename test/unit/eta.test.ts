// The ETA (src/scheduler/eta.ts): first guesses, running means that survive a restart, the queue summed in its order
// with a model load wherever the profile changes, and the running job counting down with a fake clock.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { JobStore } from '../../src/jobs/job.store';
import { EtaModel, FIRST_LOAD_S, firstGuessS, queueEtas, runtimeClass } from '../../src/scheduler/eta';
import { job, speech } from './runner-helpers';

const image = (id: string, profile = 'imgmain', steps = 25, side = 1024) => ({
  id, kind: 'image' as const, profile, images: [], audios: [], output: '/dev/null',
  params: { prompt: 'x', negative: '', seed: 1, steps, cfg: 1, width: side, height: side, res: '1K', mode: 't2i' },
});

test('first guesses: image by steps and megapixels, video by steps and pixels x frames, speech flat', () => {
  assert.equal(firstGuessS(image('a')), 2 + 0.15 * 25);
  assert.equal(firstGuessS(image('a', 'imgmain', 10, 2048)), 2 + 0.15 * 10 * 4);
  const v = job('v'); // 64x64, 5 frames, 1 step
  assert.equal(firstGuessS(v), 5 + 2.5 * ((64 * 64 * 5) / (864 * 480 * 124)));
  assert.equal(firstGuessS(speech('t')), 5);
  assert.equal(runtimeClass(image('a')), 'image/imgmain/1024x1024/-/25');
  assert.equal(runtimeClass(v), 'video/a/64x64/5/1');
});

test('measured means replace the guess, follow the last 20 measurements, and are kept in the store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-eta-'));
  try {
    let store = new JobStore(dir);
    let model = new EtaModel(store.runtimes);
    model.recordRun(image('a'), 10);
    model.recordRun(image('b'), 20);
    assert.equal(model.runS(image('c')), 15, 'the mean of the class');
    assert.equal(model.runS(image('c', 'imgmain', 30)), firstGuessS(image('c', 'imgmain', 30)), 'another class: still the guess');
    for (let i = 0; i < 200; i++) model.recordRun(image('d'), 40);
    assert.ok(Math.abs(model.runS(image('e')) - 40) < 0.01, 'after many at 40 s the mean is 40 s, not held back by old runs');
    model.recordLoad('image/imgmain', 12);
    store.close();
    store = new JobStore(dir);
    model = new EtaModel(store.runtimes);
    assert.ok(Math.abs(model.runS(image('e')) - 40) < 0.01, 'kept across a restart');
    assert.equal(model.loadS('image/imgmain'), 12);
    assert.equal(model.loadS('video/fastvid'), FIRST_LOAD_S);
    store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the queue in its order, a load where the profile changes, the running job counting down (fake clock)', () => {
  const stats = new Map<string, number>([['run/image/imgmain/1024x1024/-/25', 4], ['run/image/imgmain_bf16/1024x1024/-/25', 8], ['load/image/imgmain_bf16', 30], ['load/image/imgmain', 10]]);
  const model = new EtaModel({ get: (k) => stats.get(k), add: () => {} });
  const queue = [image('q1'), image('q2', 'imgmain_bf16'), image('q3', 'imgmain_bf16'), image('q4')];
  const running = { id: 'r', key: 'image/imgmain', started: 1000, expectedS: 14 };
  let clock = 1005;
  let e = queueEtas(clock, running, queue, model);
  assert.deepEqual([...e.entries()], [['r', 9], ['q1', 13], ['q2', 13 + 8 + 30], ['q3', 13 + 8 + 30 + 8], ['q4', 13 + 8 + 30 + 8 + 4 + 10]]);
  clock = 1016; // the running job is late: its remaining part stays at 0, the rest does not go negative
  e = queueEtas(clock, running, queue, model);
  assert.equal(e.get('r'), 0);
  assert.equal(e.get('q1'), 4);
  // nothing running: the model on the GPU decides whether the first job pays a load
  assert.equal(queueEtas(clock, undefined, queue, model, 'image/imgmain').get('q1'), 4);
  assert.equal(queueEtas(clock, undefined, queue, model, 'video/fastvid').get('q1'), 4 + 10);
});

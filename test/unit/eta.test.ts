// The ETA (src/scheduler/eta.ts): first guesses, running means that survive a restart, the queue summed in its order
// with a model load wherever the profile changes, and the running job counting down with a fake clock.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { JobStore } from '../../src/jobs/job.store';
import { EtaModel, FIRST_LOAD_S, firstGuessS, shownLeftS, queueEtas, nextSeries, runningLeftS, runtimeClass, seriesRate, workUnits } from '../../src/scheduler/eta';
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
  clock = 1016; // the running job is late: it shows a little left (never 0 while it runs), the rest follows it
  e = queueEtas(clock, running, queue, model);
  assert.equal(e.get('r'), 0.2, '2 s late: a tenth of that');
  assert.equal(e.get('q1'), 0.2 + 4);
  // nothing running: the model on the GPU decides whether the first job pays a load
  assert.equal(queueEtas(clock, undefined, queue, model, 'image/imgmain').get('q1'), 4);
  assert.equal(queueEtas(clock, undefined, queue, model, 'video/fastvid').get('q1'), 4 + 10);
});

test('a class never run: the profile\'s measured split scaled by megapixel-frames and steps', () => {
  const stats = new Map<string, number>();
  const model = new EtaModel({ get: (k) => stats.get(k), add: (k, v) => stats.set(k, v) });
  // a 256x256 8-step run measured: 2 s a step, 4 s after the last step, 20 s in all (so 4 s neither)
  const small = image('s', 'imgmain', 8, 256);
  model.recordRun(small, 20);
  model.recordSplit(small, 20, { stepS: 2, postS: 4 });
  assert.equal(model.runS(small), 20, 'its own class: the measured mean');
  assert.equal(model.postS(small), 4);
  // 1024x1024 is 16x the pixels; 25 steps: per step 16 x 2 s, the rest 16 x 4 s
  const big = image('b', 'imgmain', 25, 1024);
  assert.equal(workUnits(big) / workUnits(small), 16);
  assert.ok(Math.abs(model.runS(big) - 16 * (2 * 25 + 4)) < 1e-9, String(model.runS(big)));
  assert.ok(Math.abs(model.postS(big)! - 16 * 4) < 1e-9);
  // another profile is not measured by it
  assert.equal(model.runS(image('o', 'imgart_turbo', 8, 256)), firstGuessS(image('o', 'imgart_turbo', 8, 256)));
  // video scales by frames too
  const v = job('v'); // 64x64, 5 frames, 1 step
  model.recordSplit(v, 10, { stepS: 6, postS: 3 });
  const v2 = { ...v, params: { ...v.params, frames: 10, steps: 2 } } as typeof v;
  assert.ok(Math.abs(model.runS(v2) - 2 * (6 * 2 + 4)) < 1e-9, String(model.runS(v2)));
});

test('a running job by its own progress: seconds per step so far, never 0 while it runs', () => {
  // the issue: a video at step 4 of 8 after 4 minutes, expected (a guess) 10 s, showed 0
  const steps = { max: 8, from: { at: 1000, value: 0 }, last: { at: 1240, value: 4 } };
  const left = runningLeftS(1240, { started: 990, expectedS: 10, steps, postS: 30 });
  assert.equal(left, 60 * 4 + 30, '4 steps left at 60 s each, then 30 s of decoding');
  // between reports the step under way counts down, but never below the steps after it
  assert.equal(runningLeftS(1270, { started: 990, expectedS: 10, steps, postS: 30 }), 60 * 4 - 30 + 30);
  assert.equal(runningLeftS(1400, { started: 990, expectedS: 10, steps, postS: 30 }), 60 * 3 + 30);
  // no measured time after the steps: a quarter of the sampling
  assert.equal(runningLeftS(1240, { started: 990, expectedS: 10, steps }), 240 + 0.25 * 60 * 8);
  // sampling done: the time after it less what passed; a later series (frames decoded) by its own rate
  const done = { ...steps, last: { at: 1480, value: 8 } };
  assert.equal(runningLeftS(1490, { started: 990, expectedS: 10, steps: done, postS: 30 }), 20);
  const frames = { max: 100, from: { at: 1485, value: 0 }, last: { at: 1495, value: 10 } };
  assert.equal(runningLeftS(1495, { started: 990, expectedS: 10, steps: done, postS: 30, after: frames }), 90);
  // past every estimate: still more than 0, growing with how late it is
  assert.equal(runningLeftS(1510, { started: 990, expectedS: 10, steps: done, postS: 30 }), 0.1);
  assert.equal(runningLeftS(1600, { started: 990, expectedS: 10, steps: done, postS: 30 }), 9, '90 s late');
  // before the first step: the expectation less what passed, never 0
  assert.equal(runningLeftS(1000, { started: 990, expectedS: 25 }), 15);
  assert.equal(runningLeftS(2015, { started: 990, expectedS: 25 }), 100);
  assert.equal(shownLeftS(0), 0.1);
  // the first step (shaders compiled for a new size) is left out of the rate once a second one is in
  let series = nextSeries(undefined, 8, { at: 0, value: 0 });
  series = nextSeries(series, 8, { at: 30, value: 1 });
  assert.equal(seriesRate(series), 30, 'one step: all there is');
  series = nextSeries(series, 8, { at: 40, value: 2 });
  series = nextSeries(series, 8, { at: 50, value: 3 });
  assert.equal(seriesRate(series), 10, 'steps 2 and 3 took 10 s each');
  // one-off work the worker reported between two reports (a preview projection fitted after step 1) is left out
  let fit = nextSeries(undefined, 8, { at: 0, value: 0, off: 0 });
  fit = nextSeries(fit, 8, { at: 1, value: 1, off: 0 });
  fit = nextSeries(fit, 8, { at: 23, value: 2, off: 21.5 });
  fit = nextSeries(fit, 8, { at: 23.5, value: 3, off: 21.5 });
  assert.equal(seriesRate(fit), 0.5, 'steps 2 and 3 took 0.5 s each once the 21.5 s fit is left out');
  assert.deepEqual(nextSeries(series, 100, { at: 60, value: 0 }), { max: 100, from: { at: 60, value: 0 }, last: { at: 60, value: 0 } }, 'a new series (frames decoded)');
  // the queue behind it starts from that
  const model = new EtaModel({ get: (k) => (k === 'run/image/imgmain/1024x1024/-/25' ? 7 : undefined), add: () => {} });
  const e = queueEtas(1240, { id: 'r', key: 'image/imgmain', started: 990, expectedS: 10, leftS: 270 }, [image('q')], model);
  assert.deepEqual([...e.entries()], [['r', 270], ['q', 277]]);
});

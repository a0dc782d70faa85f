// The GPU worker's Runner: one task at a time in order, models swapped only on a profile change, cancel, and a
// profile it does not serve; a model loaded for its task and a kept one prepared for the next.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { throwIfCancelled } from '../../src/common/errors';
import type { WorkerTask } from '../../src/worker/protocol';
import type { ServedEntry } from '../../src/worker/registry';
import { job, runnerWith } from './runner-helpers';

function entries(steps: number, log: string[]): ServedEntry[] {
  return ['a', 'b'].map((profile) => ({
    kind: 'video', profile, weights: () => 'demo',
    create: () => ({
      load: async () => void log.push(`load ${profile}`),
      unload: async () => void log.push(`unload ${profile}`),
      run: async (task, ctx) => {
        log.push(`run ${task.id}`);
        for (let i = 0; i < steps; i++) {
          await new Promise((res) => setTimeout(res, 5));
          throwIfCancelled(ctx.signal);
          ctx.progress(i + 1, steps);
        }
      },
    }),
  }));
}

test('one task at a time, in order, models swapped only on a profile change', async () => {
  const log: string[] = [];
  const { runner, events, ended } = runnerWith(entries(2, log));
  for (const [id, profile] of [['1', 'a'], ['2', 'a'], ['3', 'b'], ['4', 'a']]) runner.enqueue(job(id, profile));
  const outcomes = await Promise.all(['1', '2', '3', '4'].map(ended));
  assert.deepEqual(outcomes.map((o) => `${o.id}:${o.type}`), ['1:done', '2:done', '3:done', '4:done']);
  let concurrent = 0;
  let most = 0;
  for (const e of events) {
    if (e.type === 'started') most = Math.max(most, ++concurrent);
    if (e.type === 'done' || e.type === 'failed') concurrent--;
  }
  assert.equal(most, 1);
  assert.deepEqual(log, ['load a', 'run 1', 'run 2', 'unload a', 'load b', 'run 3', 'unload b', 'load a', 'run 4']);
  assert.deepEqual(events.filter((e) => e.type === 'loaded').map((e) => e.type === 'loaded' && `${e.id} ${e.profile}`), ['1 a', '3 b', '4 a'], 'a loaded event for each load');
  assert.deepEqual(runner.loadedKeys(), ['video/a']);
  await runner.stop();
  assert.equal(log.at(-1), 'unload a');
});

test('cancel: a waiting task is dropped as cancelled, a running one stops at its next check as interrupted', async () => {
  const { runner, ended } = runnerWith(entries(50, []));
  runner.enqueue(job('x'));
  runner.enqueue(job('y'));
  await new Promise((r) => setTimeout(r, 30));
  runner.cancel('y', 'cancelled');
  runner.cancel('x', 'interrupted');
  runner.cancel('nope', 'interrupted');
  const [x, y] = await Promise.all([ended('x'), ended('y')]);
  assert.deepEqual([x.type, x.type === 'failed' && x.code, x.type === 'failed' && x.message], ['failed', 'interrupted', 'interrupted']);
  assert.deepEqual([y.type, y.type === 'failed' && y.code], ['failed', 'cancelled']);
  await runner.stop();
});

test('a profile nobody serves fails as unavailable, naming the missing model; the next task runs', async () => {
  const { runner, run } = runnerWith(entries(1, []));
  const missing = run({ ...job('1'), kind: 'image', profile: 'imgart_turbo' } as WorkerTask);
  const next = run(job('2'));
  const m = await missing;
  assert.deepEqual([m.type, m.type === 'failed' && m.code], ['failed', 'unavailable']);
  assert.match(m.type === 'failed' ? m.message : '', /^profile imgart_turbo: the Krea 2 Turbo model is not built into this service yet/);
  assert.equal((await next).type, 'done');
  await runner.stop();
});

test('a pipeline that returns without its output file fails with that reason', async () => {
  const entry: ServedEntry = { kind: 'video', profile: 'a', weights: () => 'demo', create: () => ({ load: async () => {}, unload: async () => {}, run: async () => {} }) };
  const { runner, run } = runnerWith([entry]);
  const end = await run({ ...job('1'), output: '/nonexistent/out.mp4' });
  assert.deepEqual([end.type, end.type === 'failed' && end.message], ['failed', 'the pipeline finished without writing its output file']);
  await runner.stop();
});

test('a model is loaded for the task that needs it, and a kept one prepared for each later task (its placement follows the job)', async () => {
  const log: string[] = [];
  const { runner, ended } = runnerWith(['a', 'b'].map((profile) => ({
    kind: 'video', profile, weights: () => 'demo',
    create: () => ({
      load: async (_ctx, next) => void log.push(`load ${profile} for ${next?.id}`),
      prepare: async (_ctx, next) => void log.push(`prepare ${profile} for ${next.id}`),
      unload: async () => void log.push(`unload ${profile}`),
      run: async (task) => void log.push(`run ${task.id}`),
    }),
  })));
  for (const [id, profile] of [['1', 'a'], ['2', 'a'], ['3', 'b'], ['4', 'b']]) runner.enqueue(job(id, profile));
  await Promise.all(['1', '2', '3', '4'].map(ended));
  assert.deepEqual(log, ['load a for 1', 'run 1', 'prepare a for 2', 'run 2', 'unload a', 'load b for 3', 'run 3', 'prepare b for 4', 'run 4']);
  await runner.stop();
});

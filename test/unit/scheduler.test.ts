import assert from 'node:assert/strict';
import { test } from 'node:test';
import { throwIfCancelled } from '../../src/common/errors';
import { PipelineRegistry } from '../../src/scheduler/pipeline';
import { Outcome, Scheduler, Task } from '../../src/scheduler/scheduler';

function registryWith(steps: number, events: string[]) {
  const r = new PipelineRegistry();
  for (const profile of ['a', 'b']) {
    r.register({
      kind: 'k', profile, weights: () => 'demo',
      create: () => ({
        load: async () => void events.push(`load ${profile}`),
        unload: async () => void events.push(`unload ${profile}`),
        run: async (task: unknown, ctx) => {
          events.push(`run ${(task as { id: string }).id}`);
          for (let i = 0; i < steps; i++) {
            await new Promise((res) => setTimeout(res, 5));
            throwIfCancelled(ctx.signal);
            ctx.progress(i + 1, steps);
          }
        },
      }),
    });
  }
  return r;
}

const ended = (s: Scheduler, n: number) => new Promise<[Task, Outcome][]>((resolve) => {
  const out: [Task, Outcome][] = [];
  s.on('finished', (t, o) => { out.push([t, o]); if (out.length === n) resolve(out); });
});

test('one task at a time, FIFO, models swapped only on a profile change', async () => {
  const events: string[] = [];
  const s = new Scheduler(registryWith(2, events));
  let concurrent = 0;
  let maxConcurrent = 0;
  s.on('started', () => { concurrent++; maxConcurrent = Math.max(maxConcurrent, concurrent); });
  s.on('finished', () => concurrent--);
  const done = ended(s, 4);
  for (const [id, profile] of [['1', 'a'], ['2', 'a'], ['3', 'b'], ['4', 'a']]) s.enqueue({ id, kind: 'k', profile, payload: { id } });
  assert.deepEqual([s.position('1'), s.position('2'), s.position('4')], [1, 2, 4]);
  const outcomes = await done;
  assert.deepEqual(outcomes.map(([t, o]) => `${t.id}:${o.status}`), ['1:done', '2:done', '3:done', '4:done']);
  assert.equal(maxConcurrent, 1);
  assert.deepEqual(events, ['load a', 'run 1', 'run 2', 'unload a', 'load b', 'run 3', 'unload b', 'load a', 'run 4']);
  await s.stop();
  assert.equal(events.at(-1), 'unload a');
});

test('cancel: queued is removed, running stops at its next check with the reason', async () => {
  const s = new Scheduler(registryWith(50, []));
  const cancelled: string[] = [];
  s.on('cancelled', (t) => cancelled.push(t.id));
  const done = ended(s, 1);
  s.enqueue({ id: 'x', kind: 'k', profile: 'a', payload: { id: 'x' } });
  s.enqueue({ id: 'y', kind: 'k', profile: 'a', payload: { id: 'y' } });
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(s.cancel('y'), 'cancelled');
  assert.equal(s.cancel('x'), 'interrupted');
  assert.equal(s.cancel('nope'), undefined);
  const [[t, o]] = await done;
  assert.deepEqual([t.id, o.status, o.status === 'failed' && o.error], ['x', 'failed', 'interrupted']);
  assert.deepEqual(cancelled, ['y']);
  await s.stop();
});

test('a profile without a pipeline fails with the missing reason; the queue moves on', async () => {
  const s = new Scheduler(registryWith(1, []), undefined, (t) => `no model for ${t.profile}`);
  const done = ended(s, 2);
  s.enqueue({ id: '1', kind: 'k', profile: 'zzz', payload: {} });
  s.enqueue({ id: '2', kind: 'k', profile: 'a', payload: { id: '2' } });
  const out = await done;
  assert.deepEqual(out.map(([, o]) => (o.status === 'failed' ? o.error : 'done')), ['no model for zzz', 'done']);
  await s.stop();
});

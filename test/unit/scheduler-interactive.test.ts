import assert from 'node:assert/strict';
import { test } from 'node:test';
import { throwIfCancelled } from '../../src/common/errors';
import { PipelineRegistry } from '../../src/scheduler/pipeline';
import { Outcome, Scheduler, Task } from '../../src/scheduler/scheduler';

/** Jobs of kind 'video' (profiles a, b) take `steps` steps and call safePoint between them; 'tts' is
 * interactive. Every load/unload/run/step lands in `events`. */
function registry(events: string[], steps = 6) {
  const r = new PipelineRegistry();
  for (const profile of ['a', 'b']) {
    r.register({
      kind: 'video', profile, weights: () => 'demo',
      create: () => ({
        load: async () => void events.push(`load ${profile}`),
        unload: async () => void events.push(`unload ${profile}`),
        run: async (task: unknown, ctx) => {
          const id = (task as { id: string }).id;
          for (let i = 0; i < steps; i++) {
            await new Promise((res) => setTimeout(res, 10));
            throwIfCancelled(ctx.signal);
            events.push(`${id} step ${i}`);
            await ctx.safePoint();
          }
        },
      }),
    });
  }
  r.register({
    kind: 'tts', profile: 'tts', weights: () => 'demo', interactive: true, residentBytes: () => 1000,
    create: () => ({
      load: async () => void events.push('load tts'),
      unload: async () => void events.push('unload tts'),
      run: async (task: unknown, ctx) => {
        const id = (task as { id: string }).id;
        await new Promise((res) => setTimeout(res, 5));
        throwIfCancelled(ctx.signal);
        await ctx.safePoint(); // must not run another request inside this one
        events.push(`${id} spoke`);
      },
    }),
  });
  return r;
}

const job = (id: string, profile = 'a'): Task => ({ id, kind: 'video', profile, payload: { id } });
const speech = (id: string): Task => ({ id, kind: 'tts', profile: 'tts', payload: { id } });
const finished = (s: Scheduler, id: string) => new Promise<Outcome>((resolve) => s.on('finished', (t, o) => t.id === id && resolve(o)));
const until = async (cond: () => boolean) => { while (!cond()) await new Promise((r) => setTimeout(r, 2)); };

test('speech runs at the running job\'s next safe point when its model fits beside, and stays loaded', async () => {
  const events: string[] = [];
  const s = new Scheduler(registry(events), undefined, undefined, (bytes) => bytes <= 1000);
  const jobDone = finished(s, 'j1');
  s.enqueue(job('j1'));
  await until(() => events.includes('j1 step 1'));
  const t1 = await s.runToEnd(speech('t1'));
  assert.equal(t1.status, 'done');
  const stepsBefore = events.filter((e) => e.startsWith('j1 step')).length;
  assert.ok(stepsBefore < 6, `speech waited for the whole job: ${events.join(', ')}`);
  assert.equal(s.current()?.task.id, 'j1', 'the job is still the running one');
  const t2 = await s.runToEnd(speech('t2'));
  assert.equal(t2.status, 'done');
  assert.equal((await jobDone).status, 'done');
  assert.deepEqual(events.filter((e) => /load|unload/.test(e)), ['load a', 'load tts'], 'no model was unloaded or loaded twice');
  assert.ok(events.indexOf('t2 spoke') < events.indexOf('j1 step 5'));
  // A job on another model frees the side slot before loading.
  s.enqueue(job('j2', 'b'));
  await finished(s, 'j2');
  assert.deepEqual(events.filter((e) => /load|unload/.test(e)).slice(2), ['unload tts', 'unload a', 'load b']);
  await s.stop();
});

test('speech that does not fit beside waits for the running job, then goes before queued jobs', async () => {
  const events: string[] = [];
  const s = new Scheduler(registry(events), undefined, undefined, () => false);
  s.enqueue(job('j1'));
  s.enqueue(job('j2'));
  await until(() => events.includes('j1 step 0'));
  const spoken = s.runToEnd(speech('t1'));
  assert.equal(s.position('j2'), 1, 'job positions ignore speech');
  assert.equal((await spoken).status, 'done');
  await finished(s, 'j2');
  const order = events.filter((e) => e === 'j1 step 5' || e === 't1 spoke' || e === 'j2 step 0');
  assert.deepEqual(order, ['j1 step 5', 't1 spoke', 'j2 step 0']);
  assert.deepEqual(events.filter((e) => /load|unload/.test(e)), ['load a', 'unload a', 'load tts', 'unload tts', 'load a']);
  await s.stop();
});

test('speech while speech runs waits its turn instead of running inside it', async () => {
  const events: string[] = [];
  const s = new Scheduler(registry(events), undefined, undefined, () => true);
  const outs = await Promise.all([s.runToEnd(speech('t1')), s.runToEnd(speech('t2'))]);
  assert.deepEqual(outs.map((o) => o.status), ['done', 'done']);
  assert.deepEqual(events, ['load tts', 't1 spoke', 't2 spoke']);
  await s.stop();
});

test('cancel reaches waiting and interjected speech; the job goes on', async () => {
  const events: string[] = [];
  const s = new Scheduler(registry(events, 20), undefined, undefined, () => false);
  const cancelled: string[] = [];
  s.on('cancelled', (t) => cancelled.push(t.id));
  const jobDone = finished(s, 'j1');
  s.enqueue(job('j1'));
  await until(() => events.includes('j1 step 0'));
  const waiting = s.runToEnd(speech('t1'));
  assert.equal(s.cancel('t1'), 'cancelled');
  const out = await waiting;
  assert.deepEqual([out.status, out.status === 'failed' && out.error], ['failed', 'cancelled']);
  assert.deepEqual(cancelled, ['t1']);
  assert.equal((await jobDone).status, 'done');
  assert.ok(!events.includes('t1 spoke'));
  await s.stop();
});

test('an interjected request can be interrupted without touching the job', async () => {
  const events: string[] = [];
  const r = registry(events, 8);
  r.register({
    kind: 'tts', profile: 'tts', weights: () => 'demo', interactive: true, residentBytes: () => 1,
    create: () => ({
      load: async () => {}, unload: async () => {},
      run: async (_task: unknown, ctx) => {
        events.push('slow speech started');
        await new Promise((res) => setTimeout(res, 200));
        throwIfCancelled(ctx.signal);
      },
    }),
  });
  const s = new Scheduler(r, undefined, undefined, () => true);
  const jobDone = finished(s, 'j1');
  s.enqueue(job('j1'));
  await until(() => events.includes('j1 step 0'));
  const spoken = s.runToEnd(speech('t1'));
  await until(() => events.includes('slow speech started'));
  assert.equal(s.cancel('t1'), 'interrupted');
  const out = await spoken;
  assert.equal(out.status === 'failed' && out.error, 'interrupted');
  assert.equal((await jobDone).status, 'done');
  assert.equal(events.filter((e) => e.startsWith('j1 step')).length, 8);
  await s.stop();
});

// Speech inside the GPU worker's Runner: it runs at a running job's safe point when its model fits beside, stays
// loaded there, else waits for the job; it never runs inside another speech request; cancel reaches it either way.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { throwIfCancelled } from '../../src/common/errors';
import type { ServedEntry } from '../../src/worker/registry';
import { job, runnerWith, speech } from './runner-helpers';

/** Jobs of kind 'video' (profiles a, b) take `steps` steps and call safePoint between them; 'tts' is
 * interactive. Every load/unload/run/step lands in `log`. */
function entries(log: string[], steps = 6): ServedEntry[] {
  const jobs: ServedEntry[] = ['a', 'b'].map((profile) => ({
    kind: 'video', profile, weights: () => 'demo',
    create: () => ({
      load: async () => void log.push(`load ${profile}`),
      unload: async () => void log.push(`unload ${profile}`),
      run: async (task, ctx) => {
        for (let i = 0; i < steps; i++) {
          await new Promise((res) => setTimeout(res, 10));
          throwIfCancelled(ctx.signal);
          log.push(`${task.id} step ${i}`);
          await ctx.safePoint();
        }
      },
    }),
  }));
  const tts: ServedEntry = {
    kind: 'tts', profile: 'tts', weights: () => 'demo', interactive: true, residentBytes: () => 1000,
    create: () => ({
      load: async () => void log.push('load tts'),
      unload: async () => void log.push('unload tts'),
      run: async (task, ctx) => {
        await new Promise((res) => setTimeout(res, 5));
        throwIfCancelled(ctx.signal);
        await ctx.safePoint(); // must not run another request inside this one
        log.push(`${task.id} spoke`);
      },
    }),
  };
  return [...jobs, tts];
}

const until = async (cond: () => boolean) => { while (!cond()) await new Promise((r) => setTimeout(r, 2)); };
const loads = (log: string[]) => log.filter((e) => /load|unload/.test(e));

test("speech runs at the running job's next safe point when its model fits beside, and stays loaded", async () => {
  const log: string[] = [];
  const { runner, run } = runnerWith(entries(log), { fitsBeside: (bytes) => bytes <= 1000 });
  const jobDone = run(job('j1'));
  await until(() => log.includes('j1 step 1'));
  assert.equal((await run(speech('t1'))).type, 'done');
  const stepsBefore = log.filter((e) => e.startsWith('j1 step')).length;
  assert.ok(stepsBefore < 6, `speech waited for the whole job: ${log.join(', ')}`);
  assert.deepEqual(runner.runningIds(), ['j1'], 'the job is still the running one');
  assert.equal((await run(speech('t2'))).type, 'done');
  assert.equal((await jobDone).type, 'done');
  assert.deepEqual(loads(log), ['load a', 'load tts'], 'no model was unloaded or loaded twice');
  assert.ok(log.indexOf('t2 spoke') < log.indexOf('j1 step 5'));
  // A job on another model frees the side slot before loading.
  await run(job('j2', 'b'));
  assert.deepEqual(loads(log).slice(2), ['unload tts', 'unload a', 'load b']);
  await runner.stop();
});

test('speech that does not fit beside waits for the running job, then goes before the next job', async () => {
  const log: string[] = [];
  const { runner, run } = runnerWith(entries(log), { fitsBeside: () => false });
  const j1 = run(job('j1'));
  await until(() => log.includes('j1 step 0'));
  const spoken = run(speech('t1'));
  const j2 = run(job('j2'));
  assert.equal((await spoken).type, 'done');
  await Promise.all([j1, j2]);
  const order = log.filter((e) => e === 'j1 step 5' || e === 't1 spoke' || e === 'j2 step 0');
  assert.deepEqual(order, ['j1 step 5', 't1 spoke', 'j2 step 0']);
  assert.deepEqual(loads(log), ['load a', 'unload a', 'load tts', 'unload tts', 'load a']);
  await runner.stop();
});

test('speech while speech runs waits its turn instead of running inside it', async () => {
  const log: string[] = [];
  const { runner, run } = runnerWith(entries(log), { fitsBeside: () => true });
  const outs = await Promise.all([run(speech('t1')), run(speech('t2'))]);
  assert.deepEqual(outs.map((o) => o.type), ['done', 'done']);
  assert.deepEqual(log, ['load tts', 't1 spoke', 't2 spoke']);
  await runner.stop();
});

test('cancel reaches waiting speech; the job goes on', async () => {
  const log: string[] = [];
  const { runner, run } = runnerWith(entries(log, 20), { fitsBeside: () => false });
  const jobDone = run(job('j1'));
  await until(() => log.includes('j1 step 0'));
  const waiting = run(speech('t1'));
  runner.cancel('t1', 'interrupted');
  const out = await waiting;
  assert.deepEqual([out.type, out.type === 'failed' && out.code], ['failed', 'cancelled']);
  assert.equal((await jobDone).type, 'done');
  assert.ok(!log.includes('t1 spoke'));
  await runner.stop();
});

test('an interjected request can be interrupted without touching the job', async () => {
  const log: string[] = [];
  const slow: ServedEntry = {
    kind: 'tts', profile: 'tts', weights: () => 'demo', interactive: true, residentBytes: () => 1,
    create: () => ({
      load: async () => {}, unload: async () => {},
      run: async (_task, ctx) => {
        log.push('slow speech started');
        await new Promise((res) => setTimeout(res, 200));
        throwIfCancelled(ctx.signal);
      },
    }),
  };
  const { runner, run } = runnerWith([...entries(log, 8), slow], { fitsBeside: () => true });
  const jobDone = run(job('j1'));
  await until(() => log.includes('j1 step 0'));
  const spoken = run(speech('t1'));
  await until(() => log.includes('slow speech started'));
  runner.cancel('t1', 'interrupted');
  const out = await spoken;
  assert.equal(out.type === 'failed' && out.code, 'interrupted');
  assert.equal((await jobDone).type, 'done');
  assert.equal(log.filter((e) => e.startsWith('j1 step')).length, 8);
  await runner.stop();
});

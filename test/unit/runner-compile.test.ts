// The one-off work of a run (issue 47 item 11): the worker reports the seconds a task spent compiling shaders and
// doing what a loaded model does once (ctx.oneOff: a preview projection's fit) (compile_s, and compile_tail_s after
// its last progress report; one_off_s so far in each progress report), which the scheduler leaves out of what the task's
// class takes; on a software GPU a class's first run spends as long compiling as computing, so a second run of the
// class was estimated at up to twice what it took.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { gpuQueueActivity, KernelCache } from '../../src/engine/kernels';
import type { RunContext } from '../../src/models/common/pipeline';
import type { ServedEntry } from '../../src/worker/registry';
import { job, runnerWith } from './runner-helpers';

/** A device whose pipeline creation takes `ms` (as compiling does), counting the pipelines it made. */
function slowDevice(ms: number) {
  const made: string[] = [];
  const device = {
    createShaderModule: () => ({}),
    createComputePipeline: (d: { label?: string }) => {
      const end = performance.now() + ms;
      while (performance.now() < end);
      made.push(d.label ?? '');
      return { getBindGroupLayout: () => ({}) };
    },
  };
  return { device: device as unknown as GPUDevice, made };
}

/** A served entry whose run is `run` (no load or unload work). */
function entryRunning(run: (ctx: RunContext) => void | Promise<void>): ServedEntry {
  return {
    kind: 'video', profile: 'a', weights: () => 'demo',
    create: () => ({ load: async () => undefined, unload: async () => undefined, run: async (_task, ctx) => run(ctx) }),
  };
}

test('a run reports the seconds it spent compiling, and the part after its last progress report', async () => {
  const { device, made } = slowDevice(80);
  const kernels = new KernelCache(device, false);
  const entry = entryRunning((ctx) => {
    kernels.get({ shader: 'softmax', entry: 'softmax', dtype: 'f32', constants: { WG: 64 } }); // before its steps
    ctx.progress(1, 1);
    kernels.get({ shader: 'softmax', entry: 'softmax', dtype: 'f32', constants: { WG: 128 } }); // after them (decoding)
  });
  const { run } = runnerWith([entry]);
  const first = await run(job('1'));
  assert.equal(first.type, 'done');
  assert.equal(made.length, 2);
  if (first.type !== 'done') return;
  assert.ok(first.compile_s! >= 0.16 && first.compile_s! < first.exec_s + 1e-9, `compile_s ${first.compile_s}, exec_s ${first.exec_s}`);
  assert.ok(first.compile_tail_s! >= 0.08 && first.compile_tail_s! < 0.16, `compile_tail_s ${first.compile_tail_s}`);
  // the same shapes again: compiled already, nothing to leave out
  const second = await run(job('2'));
  assert.equal(made.length, 2);
  assert.ok(second.type === 'done' && second.compile_s! < 0.01 && second.compile_tail_s! < 0.01, JSON.stringify(second));
});

test('a compile while submitted GPU work is pending is not counted: the CPU compiles while the GPU computes', async () => {
  const { device, made } = slowDevice(80);
  const kernels = new KernelCache(device, false);
  const entry = entryRunning((ctx) => {
    gpuQueueActivity.submitted(); // a step's work submitted, not yet seen done
    kernels.get({ shader: 'softmax', entry: 'softmax', dtype: 'f32', constants: { WG: 32 } });
    ctx.progress(1, 1);
    gpuQueueActivity.drained(); // a sync saw it done: the GPU is idle while the next one compiles
    kernels.get({ shader: 'softmax', entry: 'softmax', dtype: 'f32', constants: { WG: 256 } });
  });
  const { run } = runnerWith([entry]);
  const r = await run(job('1'));
  assert.equal(made.length, 2);
  assert.ok(r.type === 'done', JSON.stringify(r));
  if (r.type !== 'done') return;
  // only the second (80 ms, after the last progress report) counts
  assert.ok(r.compile_s! >= 0.08 && r.compile_s! < 0.16, `compile_s ${r.compile_s}`);
  assert.ok(r.compile_tail_s! >= 0.08 && r.compile_tail_s! < 0.16, `compile_tail_s ${r.compile_tail_s}`);
});

test('a loaded model\'s one-off work (ctx.oneOff) is reported with the compiles, once, and in the progress reports', async () => {
  const { device, made } = slowDevice(80);
  const kernels = new KernelCache(device, false);
  let fitted: Promise<number> | undefined;
  const entry = entryRunning(async (ctx) => {
    ctx.progress(0, 2);
    ctx.progress(1, 2);
    // a preview projection fitted at the first step's preview: 120 ms of work holding one 80 ms compile
    fitted ??= ctx.oneOff!(async () => {
      kernels.get({ shader: 'softmax', entry: 'softmax', dtype: 'f32', constants: { WG: 16 } });
      await new Promise((r) => setTimeout(r, 120));
      return 1;
    });
    await fitted;
    ctx.progress(2, 2);
  });
  const { run, events } = runnerWith([entry]);
  const first = await run(job('1'));
  assert.equal(made.length, 1);
  assert.ok(first.type === 'done', JSON.stringify(first));
  if (first.type !== 'done') return;
  // 80 ms compiling + 120 ms of work besides, the compile counted once
  assert.ok(first.compile_s! >= 0.195 && first.compile_s! < 0.26, `compile_s ${first.compile_s}`);
  assert.ok(first.compile_tail_s! < 0.01, `compile_tail_s ${first.compile_tail_s}: the work was before the last report`);
  const offs = events.filter((e) => e.type === 'progress' && e.id === '1').map((e) => (e as { one_off_s?: number }).one_off_s!);
  assert.equal(offs.length, 3);
  assert.ok(offs[0]! < 0.01 && offs[1]! < 0.01 && offs[2]! >= 0.195, `one_off_s ${offs.join(' ')}`);
  // done once: a second run of the loaded model reports none
  const second = await run(job('2'));
  assert.ok(second.type === 'done' && second.compile_s! < 0.01, JSON.stringify(second));
});

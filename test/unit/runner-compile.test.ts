// The one-off work of a run (issue 47 item 11): the worker reports the seconds a task spent compiling shaders
// (compile_s, and compile_tail_s after its last progress report), which the scheduler leaves out of what the task's
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
function entryRunning(run: (ctx: RunContext) => void): ServedEntry {
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

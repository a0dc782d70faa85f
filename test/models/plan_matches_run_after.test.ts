// A plan tells the truth for a job that runs after another on a kept model (issue 42): the worker keeps a video
// pipeline loaded between jobs, and MiniMax H3's DiT blocks are placed by the job's size (residency.ts). Under a budget
// that holds a small job with the blocks resident but not a bigger one, the plan of a job (the shape-only engine, a
// fresh pipeline loaded for it: what `npm run plan`, dry_run and the fit check answer) equals that job measured on
// lavapipe after the other job ran on the same pipeline: every stage after the load (peak, bytes held, work, steps),
// and the job's peak. The load stage itself differs by construction: a fresh load reads the weights, a kept model
// only moves its blocks, from what the job before left (at most that job's own peak).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { STAGE } from '../../src/catalog';
import { Engine } from '../../src/engine/engine';
import { adapterProfileOf } from '../../src/engine/plan-device';
import { measureRun, type StageCost } from '../../src/models/common/stage-meter';
import { defaultComputeDType } from '../../src/models/common/weights';
import { planDemoH3 } from '../../src/models/minimax_h3/demo';
import { h3DirsFromRoot, jobGeometry, type H3ResidencyReport } from '../../src/models/minimax_h3/pipeline';
import { samplingWorkingBytes } from '../../src/models/minimax_h3/residency';
import { parseH3Config } from '../../src/models/minimax_h3/transformer/config';
import { h3Variant } from '../../src/models/minimax_h3/variants';
import { h3ProfilePipeline, h3RootFiles, videoTaskPipeline } from '../../src/worker/profiles/video';
import type { VideoTask as WorkerVideoTask } from '../../src/worker/protocol';
import { testEngine } from '../engine/helpers';

const rows = (s: StageCost[]) => s.map((c) => ({ ...c }));
const peak = (s: StageCost[]) => Math.max(...s.map((c) => c.peakGpuBytes));

describe('a plan equals the run of a job after another on the kept pipeline', () => {
  let real: Engine;
  let plan: Engine;
  let dir: string;
  let root: string;
  let budget = 0;
  const variant = h3Variant('fastvid');
  let n = 0;
  /** The tiniest jobs of the grid: 64x64 (small) and 96x64 (big), 22 frames, 2 steps. */
  const job = (width: number): WorkerVideoTask => ({
    id: 'plan', kind: 'video', profile: variant.name, images: [], audios: [], output: join(dir, `out-${++n}.mp4`),
    params: { prompt: 'a cat sings', seed: 7, steps: 2, width, height: 64, frames: 22, mode: 't2v', image_mode: 'keyframe', audio_mode: 'voice', tts_text: '', tts_ref_text: '', tts_language: 'Auto' },
  });
  const make = (e: Engine, o: Parameters<typeof h3ProfilePipeline>[1] extends infer O ? Partial<O> : never = {}) =>
    videoTaskPipeline(h3ProfilePipeline(variant, {
      engine: async () => e, locate: async () => ({ dirs: h3DirsFromRoot(root), files: h3RootFiles(variant, root) }), memoryBudgetBytes: budget, ...o,
    }), () => { throw new Error('no speech in this job'); });

  before(async () => {
    real = await testEngine();
    plan = Engine.createShapeOnly(adapterProfileOf(real.describe(), 24 * 2 ** 30));
    dir = mkdtempSync(join(tmpdir(), 'kiln-plan-after-'));
    root = join(dir, 'h3');
    mkdirSync(root);
    await (await planDemoH3(real)).write(root);
    // the budget between the two jobs' needs with every block resident (the policy's estimate), from a plan's load
    let weightBytes = 0;
    const probe = make(plan, { blockOffload: 'off', onLoaded: (b) => (weightBytes = b) });
    await probe.load({ signal: new AbortController().signal, stage: () => {}, progress: () => {}, safePoint: async () => {} });
    await probe.unload();
    const c = parseH3Config(JSON.parse(readFileSync(join(root, 'transformer', 'config.json'), 'utf8')), 'the demo transformer config');
    const need = (t: WorkerVideoTask) => weightBytes + samplingWorkingBytes(c, jobGeometry(t.params.frames, t.params.height, t.params.width, c.patchSize), defaultComputeDType(real));
    budget = Math.round((need(job(64)) + need(job(96))) / 2);
  });
  after(() => {
    plan.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const [first, second] of [[64, 96], [96, 64]] as const) {
    test(`the ${second === 96 ? 'big' : 'small'} job after the ${first === 96 ? 'big' : 'small'} one: its plan is its measured run`, async () => {
      const placed: string[] = [];
      const onResidency = (r: H3ResidencyReport) => placed.push(r.blocks);
      const kept = make(real, { onResidency });
      let measured: StageCost[];
      let before: StageCost[];
      try {
        before = await measureRun(real, kept, job(first));
        measured = await measureRun(real, kept, job(second));
      } finally {
        await kept.unload();
      }
      const fresh = make(plan, { onResidency });
      let planned: StageCost[];
      try {
        planned = await measureRun(plan, fresh, job(second));
      } finally {
        await fresh.unload();
      }
      const [small, big] = ['resident', 'streamed'];
      assert.deepEqual(placed, first === 64 ? [small, big, big] : [big, small, small]);
      // the kept model's load stage moved the blocks (and read nothing); every later stage is the plan's
      assert.equal(measured[0]!.stage, STAGE.loadModel);
      assert.equal(planned[0]!.stage, STAGE.loadModel);
      assert.equal(measured[0]!.heldGpuBytes, planned[0]!.heldGpuBytes, 'the load leaves the job the same bytes held');
      assert.deepEqual(rows(measured.slice(1)), rows(planned.slice(1)));
      assert.equal(peak(measured.slice(1)), peak(planned.slice(1)));
      // the move's peak is what the job before left on the GPU, never more than that job's own peak
      assert.ok(measured[0]!.peakGpuBytes <= peak(before), `${measured[0]!.peakGpuBytes} moving the blocks, ${peak(before)} the job before`);
      assert.ok(peak(measured) <= Math.max(peak(planned), peak(before)));
    });
  }
});

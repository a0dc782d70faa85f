// A plan tells the truth: each image pipeline and three video profiles on their demo checkpoints, run on lavapipe and run on the shape-only
// engine standing for it (src/engine/plan-device.ts), gives the same peak GPU bytes per stage and the same
// dispatches, FLOPs and bytes per stage, at several sizes, 16-bit and int8. The bound is exact equality: the plan
// is the same code on the same pool, without the device. A loader or pipeline that allocates differently when it
// plans (a read it skips, a size it guesses) fails here.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { STAGE } from '../../src/catalog';
import { Engine, type EngineHolder } from '../../src/engine/engine';
import { adapterProfileOf } from '../../src/engine/plan-device';
import type { Pipeline } from '../../src/models/common/pipeline';
import { measureRun, type StageCost } from '../../src/models/common/stage-meter';
import { Krea2Pipeline, krea2DemoLayout, planDemoKrea2, type Krea2ImageTask } from '../../src/models/krea2';
import { planDemoQwenImage21 } from '../../src/models/qwen_image21/demo';
import { QwenImage21Pipeline, type QwenImageTask } from '../../src/models/qwen_image21/pipeline';
import type { ImageResidencyReport } from '../../src/models/common/image-residency';
import { h3Variant } from '../../src/models/minimax_h3/variants';
import { h3ProfilePipeline, h3RootFiles, videoProfileEntry, videoTaskPipeline } from '../../src/worker/profiles/video';
import { planDemoH3 } from '../../src/models/minimax_h3/demo';
import { h3DirsFromRoot } from '../../src/models/minimax_h3/pipeline';
import type { VideoTask as WorkerVideoTask } from '../../src/worker/protocol';
import { testEngine } from '../engine/helpers';

/** Stages as comparable rows (the stage, its peak, its work, its steps). */
const rows = (s: StageCost[]) => s.map((c) => ({ ...c }));

describe('a plan equals the real run on the demo checkpoints', () => {
  let real: Engine;
  let plan: Engine;
  let dir: string;
  before(async () => {
    real = await testEngine();
    plan = Engine.createShapeOnly(adapterProfileOf(real.describe(), 24 * 2 ** 30));
    dir = mkdtempSync(join(tmpdir(), 'kiln-plan-'));
    await (await planDemoKrea2(real)).write(join(dir, 'krea2'));
    await (await planDemoQwenImage21(real)).write(join(dir, 'qi21'));
  });
  after(() => {
    plan.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Measures one pipeline (built for engine e) on one task, loaded fresh; the pipeline unloaded after. */
  async function measure<T>(e: Engine, make: (e: Engine) => Pipeline<T>, task: T): Promise<StageCost[]> {
    const pipe = make(e);
    try {
      return await measureRun(e, pipe, task);
    } finally {
      await pipe.unload();
    }
  }

  let n = 0;
  const out = () => join(dir, `out-${++n}.png`);

  for (const int8 of [false, true]) {
    for (const [width, height, steps] of [[64, 48, 2], [128, 96, 3]] as const) {
      test(`Krea 2 Turbo${int8 ? ' int8' : ''} at ${width}x${height}, ${steps} steps`, async () => {
        const make = (e: Engine) => new Krea2Pipeline({ engine: async () => e, layout: async () => krea2DemoLayout(join(dir, 'krea2')), int8 });
        const task = (): Krea2ImageTask => ({
          prompt: 'a lighthouse at dusk', negative: '', cfg: 1, seed: 7, steps, width, height, references: [],
          outputPath: out(), png: { prompt: 'p', profile: 'imgart_turbo', seed: 7, steps },
        });
        const measured = await measure(real, make, task());
        const planned = await measure(plan, make, task());
        assert.deepEqual(rows(planned), rows(measured));
        assert.ok(measured.some((s) => s.steps === steps && s.work.flops > 0), 'the sampling stage counted its steps and work');
      });
    }
  }

  // the worker's own profile entries (adapter merge, int8, adaln weights on the host, step cache) on the random demo
  for (const [profile, width, height, frames] of [['fastvid', 64, 64, 22], ['turbo_int8', 96, 64, 39], ['basevid50', 64, 96, 22]] as const) {
    test(`MiniMax H3 ${profile} at ${width}x${height}, ${frames} frames`, async () => {
      const weightsDir = join(dir, 'no-weights');
      mkdirSync(weightsDir, { recursive: true });
      const make = (e: Engine) => videoProfileEntry(profile, { weightsDir, demoWeightsDir: join(dir, 'h3-demo'), demoVideo: 'random' }, { get: async () => e } as unknown as EngineHolder).create();
      const task = (): WorkerVideoTask => ({
        id: 'plan', kind: 'video', profile, images: [], audios: [], output: out().replace(/png$/, 'mp4'),
        params: { prompt: 'a cat sings', seed: 7, steps: 3, width, height, frames, mode: 't2v', image_mode: 'keyframe', audio_mode: 'voice', tts_text: '', tts_ref_text: '', tts_language: 'Auto' },
      });
      const measured = await measure(real, make, task());
      const planned = await measure(plan, make, task());
      if (h3Variant(profile).adapter) {
        // The turbo adapter is merged as the weights are read (adapter.ts: a low-rank product on the GPU per adapted
        // linear); a plan reads no weights, so its load stage does less work than the run (a lower bound), with the
        // same memory. Every other figure is equal.
        const [p0, m0] = [planned[0]!, measured[0]!];
        assert.equal(p0.stage, STAGE.loadModel);
        assert.ok(p0.work.dispatches < m0.work.dispatches && p0.work.flops < m0.work.flops, 'the merge is the load stage\'s extra work');
        planned[0] = { ...p0, work: m0.work, byRate: m0.byRate, shapes: m0.shapes };
      }
      assert.deepEqual(rows(planned), rows(measured));
      assert.ok(measured.some((s) => s.stage === STAGE.videoDecode && s.work.flops > 0), 'the video decode was measured');
    });
  }

  // the DiT's weights on the host while the text encoder runs, its blocks streamed while sampling (loaded straight to
  // host memory), the text encoder's layers streamed (the residency policy forced): the plan counts them off the GPU
  // and back as the run does, int8 and 16-bit
  for (const [profile, width, height, frames, blockOffload, textLayers] of [['turbo_int8', 96, 64, 22, 'off', 'resident'], ['fastvid', 64, 64, 22, 'on', 'resident'], ['turbo_int8', 64, 64, 22, 'on', 'resident'], ['fastvid', 64, 64, 22, 'on', 'streamed'], ['turbo_int8', 64, 64, 22, 'off', 'streamed']] as const) {
    test(`MiniMax H3 ${profile} at ${width}x${height}, ${frames} frames, the DiT on the host while encoding, blocks ${blockOffload === 'on' ? 'streamed' : 'resident'}, text encoder layers ${textLayers}`, async () => {
      const root = join(dir, 'h3');
      if (!existsSync(root)) await (await planDemoH3(real)).write(root);
      const variant = h3Variant(profile);
      const policies: string[] = [];
      const make = (e: Engine) => videoTaskPipeline(h3ProfilePipeline(variant, {
        engine: async () => e, locate: async () => ({ dirs: h3DirsFromRoot(root), files: h3RootFiles(variant, root) }),
        textResidency: 'host', blockOffload, textLayers, onResidency: (r) => policies.push(`${r.dit} ${r.blocks} ${r.textLayers}`),
      }), () => { throw new Error('no speech in this job'); });
      const task = (): WorkerVideoTask => ({
        id: 'plan', kind: 'video', profile, images: [], audios: [], output: out().replace(/png$/, 'mp4'),
        params: { prompt: 'a cat sings', seed: 7, steps: 2, width, height, frames, mode: 't2v', image_mode: 'keyframe', audio_mode: 'voice', tts_text: '', tts_ref_text: '', tts_language: 'Auto' },
      });
      const measured = await measure(real, make, task());
      const planned = await measure(plan, make, task());
      const blocks = blockOffload === 'on' ? 'streamed' : 'resident';
      assert.deepEqual(policies, [`host ${blocks} ${textLayers}`, `host ${blocks} ${textLayers}`]);
      if (variant.adapter) planned[0] = { ...planned[0]!, work: measured[0]!.work, byRate: measured[0]!.byRate, shapes: measured[0]!.shapes }; // the merge, as above
      assert.deepEqual(rows(planned), rows(measured));
    });
  }

  for (const int8 of [true, false]) {
    for (const [width, height, cfg] of [[256, 192, 1], [192, 256, 2]] as const) {
      test(`Qwen-Image-2.1${int8 ? ' int8' : ''} at ${width}x${height}, cfg ${cfg}`, async () => {
        const make = (e: Engine) => new QwenImage21Pipeline({ engine: async () => e, checkpoint: async () => join(dir, 'qi21'), int8 });
        const task = (): QwenImageTask => ({
          prompt: 'a red kiln at dusk', negative: 'blurry', cfg, seed: 3, steps: 2, width, height, references: [], referenceArea: 512 * 512,
          outputPath: out(), png: { prompt: 'a red kiln at dusk', profile: 'imgmain', seed: 3, steps: 2 },
        });
        const measured = await measure(real, make, task());
        const planned = await measure(plan, make, task());
        assert.deepEqual(rows(planned), rows(measured));
      });
    }
  }

  // the image residency policies forced (common/image-residency.ts): the text encoder offloaded to host memory after
  // the encoding, or its layers streamed while encoding; the plan counts the bytes off the GPU and the uploads as the
  // run does, and reports the same policy and host-to-GPU bytes
  for (const textResidency of ['offloaded', 'streamed'] as const) {
    test(`Qwen-Image-2.1 int8 at 192x256, cfg 2, the text encoder ${textResidency}`, async () => {
      const reports: ImageResidencyReport[] = [];
      const make = (e: Engine) => new QwenImage21Pipeline({ engine: async () => e, checkpoint: async () => join(dir, 'qi21'), int8: true, textResidency, onResidency: (r) => reports.push(r) });
      const task = (): QwenImageTask => ({
        prompt: 'a red kiln at dusk', negative: 'blurry', cfg: 2, seed: 3, steps: 2, width: 192, height: 256, references: [], referenceArea: 512 * 512,
        outputPath: out(), png: { prompt: 'a red kiln at dusk', profile: 'imgmain', seed: 3, steps: 2 },
      });
      const measured = await measure(real, make, task());
      const planned = await measure(plan, make, task());
      assert.deepEqual(rows(planned), rows(measured));
      assert.deepEqual(reports.map((r) => [r.textEncoder, r.hostToGpuBytes, r.gpuToHostBytes]), [reports[0]!, reports[0]!].map((r) => [textResidency, r.hostToGpuBytes, r.gpuToHostBytes]));
      assert.ok(reports[0]!.hostToGpuBytes > 0);
    });
    test(`Krea 2 Turbo int8 at 64x48, the text encoder ${textResidency}`, async () => {
      const reports: ImageResidencyReport[] = [];
      const make = (e: Engine) => new Krea2Pipeline({ engine: async () => e, layout: async () => krea2DemoLayout(join(dir, 'krea2')), int8: true, textResidency, onResidency: (r) => reports.push(r) });
      const task = (): Krea2ImageTask => ({
        prompt: 'a lighthouse at dusk', negative: '', cfg: 1, seed: 7, steps: 2, width: 64, height: 48, references: [],
        outputPath: out(), png: { prompt: 'p', profile: 'imgart_turbo', seed: 7, steps: 2 },
      });
      const measured = await measure(real, make, task());
      const planned = await measure(plan, make, task());
      assert.deepEqual(rows(planned), rows(measured));
      assert.deepEqual(reports.map((r) => [r.textEncoder, r.hostToGpuBytes, r.gpuToHostBytes]), [reports[0]!, reports[0]!].map((r) => [textResidency, r.hostToGpuBytes, r.gpuToHostBytes]));
      assert.ok(reports[0]!.hostToGpuBytes > 0);
    });
  }

  // the DiT's blocks streamed from host memory (common/block-stream.ts, forced on): the plan counts the blocks leaving
  // the GPU as they load and the two on it at a time while sampling as the run does, and the same uploads
  const blockRows = (reports: ImageResidencyReport[]) => reports.map((r) => [r.blocks, r.blockHostBytes, r.samplingHostToGpuBytes]);
  /** The run measured, then planned: equal stage by stage, the blocks streamed in both with the same placement. */
  async function streamedMatches<T>(make: (e: Engine) => Pipeline<T>, task: () => T, reports: ImageResidencyReport[]): Promise<void> {
    const measured = await measure(real, make, task());
    const planned = await measure(plan, make, task());
    assert.deepEqual(rows(planned), rows(measured));
    assert.equal(reports[0]!.blocks, 'streamed');
    assert.ok(reports[0]!.samplingHostToGpuBytes > 0);
    assert.deepEqual(blockRows(reports.slice(1)), blockRows(reports.slice(0, 1)));
  }
  test('Qwen-Image-2.1 int8 at 192x256, cfg 2, the blocks streamed', async () => {
    const reports: ImageResidencyReport[] = [];
    const make = (e: Engine) => new QwenImage21Pipeline({ engine: async () => e, checkpoint: async () => join(dir, 'qi21'), int8: true, blockOffload: 'on', onResidency: (r) => reports.push(r) });
    const task = (): QwenImageTask => ({
      prompt: 'a red kiln at dusk', negative: 'blurry', cfg: 2, seed: 3, steps: 2, width: 192, height: 256, references: [], referenceArea: 512 * 512,
      outputPath: out(), png: { prompt: 'a red kiln at dusk', profile: 'imgmain', seed: 3, steps: 2 },
    });
    await streamedMatches(make, task, reports);
  });
  test('Krea 2 Turbo at 64x48, the blocks streamed', async () => {
    const reports: ImageResidencyReport[] = [];
    const make = (e: Engine) => new Krea2Pipeline({ engine: async () => e, layout: async () => krea2DemoLayout(join(dir, 'krea2')), int8: false, blockOffload: 'on', onResidency: (r) => reports.push(r) });
    const task = (): Krea2ImageTask => ({
      prompt: 'a lighthouse at dusk', negative: '', cfg: 1, seed: 7, steps: 2, width: 64, height: 48, references: [],
      outputPath: out(), png: { prompt: 'p', profile: 'imgart_turbo', seed: 7, steps: 2 },
    });
    await streamedMatches(make, task, reports);
  });
});

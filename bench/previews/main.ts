// npm run bench:previews [-- --runs 3] [--skip-demo] [--skip-real]
// What live previews (issue 46) cost a job, on this machine's adapter.
//
// 1. Demo jobs, previews off and on, side by side: Qwen-Image-2.1 (imgmain's demo, 256x256, 10 steps), Krea 2
//    (imgart_turbo's demo, 256x256, 8 steps) and MiniMax H3 (fastvid's demo, 352p 1 s, 8 steps), each run through the
//    service's pipeline with a RunContext whose `preview` collects the webps (as the worker's runner does) or is absent
//    (PREVIEWS=false). One warm-up job with previews (it fits the latent-to-RGB projection against the loaded VAE:
//    the once-per-loaded-model cost, printed), then --runs jobs of each, alternating. Steps timed by the progress
//    callbacks (a step's time includes its preview); a preview's cost = the median step that made one less the median
//    step of the same jobs that did not, beside the median step with previews off.
// 2. Real sizes: the preview of one step at the released models' latent sizes (Qwen-Image-2.1 1K and 2K, Krea 2 1K,
//    MiniMax H3 480p 5 s and 768p 10 s): the denoised estimate's read-back, the projection and the webp encode, as each
//    pipeline's preview hook does them, on random latents of the real shape (the cost does not depend on the values).
//    A real step on these shapes takes minutes on lavapipe; the H200's figures are in docs/performance.md.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { snapFrames, STAGE, VIDEO_SIZES } from '../../src/catalog';
import { Engine } from '../../src/engine/engine';
import { previewAnimatedWebp, previewWebp, projectLatents, type LatentProjection } from '../../src/models/common/latent-preview';
import type { PreviewFrame, RunContext } from '../../src/models/common/pipeline';
import { torchRandn } from '../../src/models/common/torch-rng';
import { KREA2_LARGE_WIDE } from '../../src/models/krea2/config';
import { planDemoKrea2 } from '../../src/models/krea2/demo';
import { krea2Unpatchify } from '../../src/models/krea2/patchify';
import { channelLast, Krea2Pipeline, krea2DemoLayout, type Krea2ImageTask } from '../../src/models/krea2/pipeline';
import { DEMO_ADAPTERS, DEMO_REF_ADAPTERS, planDemoH3 } from '../../src/models/minimax_h3/demo';
import { h3DirsFromRoot, MiniMaxH3Pipeline, type H3Task } from '../../src/models/minimax_h3/pipeline';
import { h3PreviewFrames } from '../../src/models/minimax_h3/preview';
import { RELEASED_H3_TRANSFORMER } from '../../src/models/minimax_h3/released';
import { jobGeometry } from '../../src/models/minimax_h3/task';
import { h3Variant, loadH3Transformer } from '../../src/models/minimax_h3/variants';
import { planDemoQwenImage21 } from '../../src/models/qwen_image21/demo';
import { latentGrid, QwenImage21Pipeline, type QwenImageTask } from '../../src/models/qwen_image21/pipeline';
import { ensureDemoCheckpoint } from '../../src/weights';

const args = process.argv.slice(2);
const arg = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const runs = Number(arg('--runs') ?? 3);
const ms = (x: number) => `${x.toFixed(1)} ms`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** A job's sampling: the wall time of each step (from the progress callbacks of the sampling stage) and the
 * previews it sent. A step's time includes its preview: the samplers make it before they report the step. */
interface Timed {
  steps: number[];
  previews: PreviewFrame[];
}

/** A RunContext as the worker's runner gives one: previews collected when `previews`, absent otherwise. */
function timingContext(previews: boolean): { ctx: RunContext; done: () => Timed } {
  const at: number[] = [];
  const sent: PreviewFrame[] = [];
  let sampling = false;
  const ctx: RunContext = {
    signal: new AbortController().signal,
    stage: (stage) => void (sampling = stage === STAGE.sample),
    // the sampling stage's first progress call (0 of N) marks its start; a decoder's progress (frames) is not a step
    progress: () => void (sampling && at.push(performance.now())),
    safePoint: async () => {},
    ...(previews ? { preview: (p: PreviewFrame) => void sent.push(p) } : {}),
  };
  return { ctx, done: () => ({ steps: at.slice(1).map((t, i) => t - at[i]!), previews: sent }) };
}

interface DemoCase {
  name: string;
  /** One job; resolves when its output is written. */
  run(ctx: RunContext, seed: number): Promise<void>;
  unload(): Promise<void>;
}

async function demoCases(e: Engine, dir: string): Promise<DemoCase[]> {
  const demoRoot = resolve(process.env.DEMO_WEIGHTS_DIR ?? 'data/demo-weights');
  const ensure = async (name: string, plan: { version: string; write(dir: string): Promise<void> }) =>
    ensureDemoCheckpoint({ name: `bench-previews-${name}`, version: plan.version, root: demoRoot, generate: plan.write });
  const out = (seed: number, ext: string) => join(dir, `out-${seed}-${Math.random().toString(36).slice(2)}.${ext}`);

  const qRoot = await ensure('qwen-image-21', await planDemoQwenImage21(e));
  const qwen = new QwenImage21Pipeline({ engine: async () => e, checkpoint: async () => qRoot, int8: false });
  const qTask = (seed: number): QwenImageTask => ({
    prompt: 'a red kiln at dusk', negative: '', cfg: 1, seed, steps: 10, width: 256, height: 256, references: [], referenceArea: 512 * 512,
    outputPath: out(seed, 'png'), png: { prompt: 'a red kiln at dusk', profile: 'imgmain', seed, steps: 10 },
  });

  const kRoot = await ensure('krea-2', await planDemoKrea2(e));
  const krea = new Krea2Pipeline({ engine: async () => e, layout: async () => krea2DemoLayout(kRoot), int8: false });
  const kTask = (seed: number): Krea2ImageTask => ({
    prompt: 'a lighthouse at dusk, oil painting', negative: '', cfg: 1, seed, steps: 8, width: 256, height: 256, references: [],
    outputPath: out(seed, 'png'), png: { prompt: 'a lighthouse at dusk, oil painting', profile: 'imgart_turbo', seed, steps: 8 },
  });

  const hRoot = await ensure('minimax-h3', await planDemoH3(e));
  const profile = h3Variant('fastvid');
  const h3 = new MiniMaxH3Pipeline({
    engine: async () => e,
    dirs: async () => h3DirsFromRoot(hRoot),
    loadTransformer: (eng, dirs, o) => loadH3Transformer(eng, profile, {
      transformer: dirs.transformer, transformerRef: dirs.transformerRef,
      adapter: profile.adapter ? join(hRoot, DEMO_ADAPTERS[profile.adapter]) : undefined,
      refAdapter: profile.references.adapter ? join(hRoot, DEMO_REF_ADAPTERS[profile.references.adapter]) : undefined,
    }, { dtype: o.dtype, partition: o.partition }),
    textEncoderInt8: false,
  });
  const [vw, vh] = VIDEO_SIZES['16:9']!['352p']!;
  const hTask = (seed: number): H3Task => ({
    prompt: 'a fox runs along a beach at sunset', seed, steps: profile.steps, width: vw, height: vh, frames: snapFrames(1),
    images: [], imageMode: 'keyframe', audios: [], outputPath: out(seed, 'mp4'),
  });

  return [
    { name: 'Qwen-Image-2.1 demo, 256x256, 10 steps', run: (ctx, s) => qwen.run(qTask(s), ctx), unload: () => qwen.unload() },
    { name: 'Krea 2 demo, 256x256, 8 steps', run: (ctx, s) => krea.run(kTask(s), ctx), unload: () => krea.unload() },
    { name: `MiniMax H3 demo (fastvid), 352p 1 s, ${profile.steps} steps`, run: (ctx, s) => h3.run(hTask(s), ctx), unload: () => h3.unload() },
  ];
}

async function benchDemo(e: Engine): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-bench-previews-'));
  try {
    for (const c of await demoCases(e, dir)) {
      const warm = timingContext(true);
      let t0 = performance.now();
      await c.run(warm.ctx, 1);
      const w = warm.done();
      console.log(`\n${c.name}`);
      console.log(`  warm-up job (load, compiles, the projection's fit at its first preview): ${ms(performance.now() - t0)}; ` +
        `steps ${w.steps.map((s) => s.toFixed(0)).join(' ')} ms; ${w.previews.length} previews at steps ${w.previews.map((p) => p.step).join(' ')}`);
      // step times after the first (its one-off work aside): every step of the runs without previews; the steps of the
      // runs with previews split into those that made one and those that did not
      const off: number[] = [];
      const plain: number[] = [];
      const shown: number[] = [];
      let perJob = 0;
      let steps = 0;
      for (let r = 0; r < runs; r++) {
        for (const previews of [false, true]) {
          const t = timingContext(previews);
          t0 = performance.now();
          await c.run(t.ctx, 2 + r);
          const d = t.done();
          const at = new Set(d.previews.map((p) => p.step));
          d.steps.forEach((s, i) => i > 0 && (previews ? (at.has(i + 1) ? shown : plain) : off).push(s));
          if (previews) perJob = d.previews.length;
          steps = d.steps.length;
          console.log(`  run ${r + 1} previews ${previews ? 'on ' : 'off'}: job ${ms(performance.now() - t0)}, ${d.steps.length} steps ${ms(d.steps.reduce((a, b) => a + b, 0))}` +
            (previews ? ` (${d.previews.length} previews at steps ${[...at].join(' ')}, ${d.previews[0]?.width}x${d.previews[0]?.height}, ${d.previews.map((p) => p.webp.length).join('/')} B)` : ''));
        }
      }
      const step = median(plain);
      const cost = median(shown) - step;
      console.log(`  median step: previews off ${ms(median(off))}; previews on, a step without one ${ms(step)}, with one ${ms(median(shown))}: ` +
        `a preview costs ${ms(cost)} (${((100 * cost) / step).toFixed(1)} % of a step; ${perJob} in ${steps} steps: ${((100 * cost * perJob) / (step * steps)).toFixed(1)} % of sampling)`);
      await c.unload();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A projection of C channels (random weights: the cost does not depend on them). */
function randomProjection(C: number): LatentProjection {
  return { channels: C, weights: torchRandn(5, 3 * C), bias: new Float32Array(3).fill(128) };
}

interface RealCase {
  name: string;
  /** x0 as the sampler holds it. */
  shape: number[];
  /** The pipeline's preview of x0, encoded. */
  preview(x0: ReturnType<Engine['upload']>): Promise<{ width: number; height: number; webp: Buffer }>;
}

function realCases(e: Engine): RealCase[] {
  const cases: RealCase[] = [];
  for (const side of [1024, 2048]) {
    // Qwen-Image-2.1: x0 packed [1, h * w, 64] (2x2 patches of 16 channels), one cell per packed token
    const g = latentGrid(side, side);
    const p = randomProjection(64);
    cases.push({ name: `Qwen-Image-2.1 ${side}x${side}`, shape: [1, g.h * g.w, 64], preview: async (x0) => previewWebp(projectLatents(p, await e.read(x0), g.h, g.w)) });
  }
  {
    // Krea 2: x0 patch tokens [1, (h/2)(w/2), 16 * 4] -> planar latents [16, h, w] -> one cell per latent pixel
    const cfg = KREA2_LARGE_WIDE;
    const h = 1024 / 8;
    const shape = { batch: 1, channels: cfg.channels, height: h, width: h };
    const p = randomProjection(cfg.channels);
    cases.push({
      name: 'Krea 2 1024x1024', shape: [1, (h / cfg.patch) ** 2, cfg.channels * cfg.patch ** 2],
      preview: async (x0) => previewWebp(projectLatents(p, channelLast(krea2Unpatchify(await e.read(x0), shape, cfg.patch), cfg.channels, h * h), h, h)),
    });
  }
  for (const [res, sec] of [['480p', 5], ['768p', 10]] as const) {
    // MiniMax H3: x0 the generated video rows [rows, C * patch]; first, middle and last latent frames, animated
    const [width, height] = VIDEO_SIZES['16:9']![res]!;
    const patch = RELEASED_H3_TRANSFORMER.patch_size as [number, number, number];
    const C = RELEASED_H3_TRANSFORMER.in_channels;
    const geo = jobGeometry(snapFrames(sec), height, width, patch);
    const dims: [number, number, number] = [geo.numLatentFrames, geo.latentHeight, geo.latentWidth];
    const rows = (dims[0] / patch[0]) * (dims[1] / patch[1]) * (dims[2] / patch[2]);
    const p = randomProjection(C);
    cases.push({
      name: `MiniMax H3 ${res} ${sec} s (${dims.join(' x ')} latents)`, shape: [rows, C * patch[0] * patch[1] * patch[2]],
      preview: async (x0) => previewAnimatedWebp(await h3PreviewFrames(e, x0, { channels: C, dims, patch }, p)),
    });
  }
  return cases;
}

async function benchReal(e: Engine): Promise<void> {
  console.log('\nreal latent sizes: one preview (read-back + projection + webp), median of 5 after one warm-up');
  for (const c of realCases(e)) {
    const n = c.shape.reduce((a, b) => a * b, 1);
    const x0 = e.upload(torchRandn(9, n), c.shape, 'f32', 'bench preview x0');
    try {
      await c.preview(x0);
      const times: number[] = [];
      let last: { width: number; height: number; webp: Buffer } = { width: 0, height: 0, webp: Buffer.alloc(0) };
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        last = await c.preview(x0);
        times.push(performance.now() - t0);
      }
      console.log(`  ${c.name}: x0 [${c.shape.join(', ')}] ${(n * 4 / 2 ** 20).toFixed(1)} MiB f32 -> ${last.width}x${last.height} webp ${last.webp.length} B: ${ms(median(times))}`);
    } finally {
      x0.free();
    }
  }
}

async function main(): Promise<void> {
  const e = await Engine.create({ allowSoftware: true });
  const d = e.describe();
  console.log(`adapter: ${d.name} (${d.vendor}/${d.architecture}, ${d.backend}${d.software ? ', software' : ''}); date ${new Date().toISOString()}`);
  try {
    if (!args.includes('--skip-demo')) await benchDemo(e);
    if (!args.includes('--skip-real')) await benchReal(e);
  } finally {
    await e.shutdown();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

// The Krea 2 Turbo cases of npm run bench:image (--profile imgart_turbo | imgart_turbo_int8 | krea):
// the released sizes (inference.py's single_mmdit_large_wide DiT, Qwen3-VL-4B-Instruct's text model and vision tower
// from its config.json, the Qwen-Image VAE's defaults) with random weights made in memory (SyntheticCheckpoint +
// WeightSynth: nothing is written to disk), through the service's loaders and its denoising loop (pipeline.ts
// sampleKrea2). Per profile, on a fresh engine:
//   step @ size     one DiT evaluation at that output size, the prompt's context computed once (what each of the 8
//                   steps costs), best of 3 after a first one; with its FLOPs and the rate reached
//   VAE decode      at the job size, read back
//   job @ size      prompt encode (Qwen3-VL-4B taps + text fusion) + 8 steps + VAE decode, as the service runs it
//   style reference the prompt encode with one 384x384 style reference (vision tower + the longer prefill)
//   peak GPU        the engine pool's peak bytes in use (weights included)
// With KILN_PROFILE=1, after each size's step times: the GPU time of one more step per kernel and grid
// (src/engine/profiler.ts), so a run says where the step goes (GEMM shapes, attention, the rest).
// --lora-rank R: after each size's step, the same step with a random rank-R LoRA on every DiT linear attached
// beside it (models/common/lora-linear.ts, as a job's LoRAs run), and what the low-rank terms add (docs/loras.md).
// --layers N keeps the first N DiT blocks (of 28) and text layers (taps beyond them are taken from the last one
// loaded); --demo-sizes runs the demo checkpoint's sizes instead (a smoke run for adapters that cannot hold the real
// tensors: on lavapipe one DiT MLP weight, 16384 x 6144 in f16, is past the 128 MiB binding limit).
import { Engine } from '../../src/engine/engine';
import { formatProfile } from '../../src/engine/profiler';
import type { LoraFile, LoraPair } from '../../src/models/common/lora';
import { attachLoras } from '../../src/models/common/lora-linear';
import { krea2LoraNames, krea2LoraWeights } from '../../src/models/common/lora-models';
import { WeightSynth } from '../../src/models/common/random-weights';
import { SyntheticCheckpoint } from '../../src/models/common/synthetic-checkpoint';
import {
  DEMO_KREA2_DIT, DEMO_KREA2_VAE, demoKrea2TextEncoderConfig, DEMO_KREA2_TOKENS, KREA2_LARGE_WIDE, KREA2_SELECT_LAYERS, KREA2_STYLE_AREA, KREA2_TURBO_STEPS,
  Krea2Conditioner, krea2Noise, Krea2Transformer, Krea2Vae, parseKrea2Config, parseQwenImageVaeConfig, QWEN3_VL_4B, QWEN_IMAGE_VAE_DEFAULTS, qwenImageVaeDecoderShapes, sampleKrea2,
} from '../../src/models/krea2';
import { parseQwen3Config } from '../../src/models/qwen3/config';
import { imagePatches, parseQwen3VlVisionConfig, QWEN3_VL_IMAGE_PROCESSOR } from '../../src/models/qwen3_vl_vision';
import { demoTokenizerInfo } from '../../src/models/tokenizer';
import { referenceSize } from '../../src/catalog';

export interface Krea2BenchOptions {
  profile: string;
  layers?: number;
  sizes: number[];
  jobSize: number;
  steps: number;
  promptTokens: number;
  job: boolean;
  demoSizes: boolean;
  loraRank?: number;
}

/** A random LoRA of rank r on every linear of `names` that `weights` has (small values: the timing is the point). */
function randomLora(names: ReturnType<typeof krea2LoraNames>, weights: ReadonlyMap<string, unknown>, r: number): LoraFile {
  const pairs = new Map<string, LoraPair>();
  let bytes = 0;
  let seed = 1;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32 - 0.5) * 0.01;
  for (const [module, [N, K]] of names.modules) {
    if (!weights.has(module)) continue;
    const down = Float32Array.from({ length: r * K }, rnd);
    const up = Float32Array.from({ length: N * r }, rnd);
    bytes += (down.length + up.length) * 4;
    pairs.set(module, { module, source: module, down, up, rank: r, factor: 1 });
  }
  return { path: `random rank-${r} LoRA`, model: 'krea2', style: 'peft', pairs, bytes };
}

const now = () => performance.now();
const fmt = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
const gib = (b: number) => `${(b / 2 ** 30).toFixed(2)} GiB`;

/** FLOPs of one DiT evaluation over Lt text + N image rows (GEMMs and attention; norms and elementwise left out). */
export function krea2StepFlops(c: ReturnType<typeof parseKrea2Config>, Lt: number, N: number): number {
  const L = Lt + N;
  const D = c.features;
  const kv = c.kvheads * c.headDim;
  const perBlockLinear = 2 * L * (D * D * 3 + 2 * D * kv + 3 * D * c.mlpDim); // wq, gate, wo; wk, wv; SwiGLU
  const perBlockAttn = 4 * L * L * D; // QK^T and PV over all heads
  return c.layers * (perBlockLinear + perBlockAttn) + 2 * N * (c.tokenDim * D + D * c.tokenDim);
}

export async function benchKrea2(o: Krea2BenchOptions): Promise<void> {
  const int8 = o.profile === 'imgart_turbo_int8';
  const e = await Engine.create({ allowSoftware: true });
  try {
    const dtype = e.gpu.hasFeature('shader-f16') ? 'f16' : 'f32';
    const d = e.describe();
    console.log(`\nadapter: ${d.name} (${d.vendor}/${d.architecture}, ${d.backend}${d.software ? ', software' : ''})`);
    const textJson = o.demoSizes ? demoKrea2TextEncoderConfig(demoTokenizerInfo({ specialTokens: DEMO_KREA2_TOKENS })) : QWEN3_VL_4B;
    let dit = parseKrea2Config(o.demoSizes ? DEMO_KREA2_DIT : KREA2_LARGE_WIDE);
    let text = parseQwen3Config(textJson, 'text');
    let vision = parseQwen3VlVisionConfig(textJson);
    const vaeCfg = parseQwenImageVaeConfig(o.demoSizes ? DEMO_KREA2_VAE : { _class_name: 'AutoencoderKLQwenImage', ...QWEN_IMAGE_VAE_DEFAULTS });
    let taps = KREA2_SELECT_LAYERS;
    if (o.layers) {
      dit = { ...dit, layers: Math.min(o.layers, dit.layers) };
      const n = Math.min(o.layers, text.numLayers - 1);
      taps = KREA2_SELECT_LAYERS.map((l) => Math.min(l, n));
      text = { ...text, numLayers: n + 1 };
    }
    console.log(`## ${o.profile}${o.demoSizes ? ' (demo sizes)' : ''}: DiT ${dit.layers} blocks of ${dit.features} (${int8 ? 'int8' : dtype} linears), text encoder ${Math.max(...taps)} layers of ${text.hiddenSize}, compute ${dtype}`);
    const bytes = dtype === 'f16' ? 2 : 4;
    const rows = Math.min(text.vocabSize, Math.floor(e.pool.maxBindingBytes / (text.hiddenSize * bytes)));
    if (rows < text.vocabSize) {
      console.log(`note: embed_tokens cut to ${rows} rows (ids taken modulo) to fit this adapter's ${e.pool.maxBindingBytes / 2 ** 20} MiB binding limit`);
      text = { ...text, vocabSize: rows };
    }
    vision = { ...vision, imageTokenId: text.vocabSize - 1 }; // an id no other (synthetic) token of the bench uses
    const synth = new WeightSynth(1);
    // Stored as F16, not the published BF16: f16 weights then upload as a copy. The BF16 -> f16 conversion (a table
    // read per element, load.ts) is load time, which this bench does not measure; at 16 G elements it kept the
    // first H200 run (2026-11-28) loading for its whole 170 s step.
    const ditCkpt = new SyntheticCheckpoint({ label: 'random Krea 2 DiT', dtype: 'F16', fill: synth.fill });
    const textCkpt = new SyntheticCheckpoint({ label: 'random Qwen3-VL-4B', dtype: 'F16', fill: synth.fill });
    const vaeShapes = qwenImageVaeDecoderShapes(vaeCfg);
    const vaeCkpt = new SyntheticCheckpoint({ label: 'random Qwen-Image VAE', dtype: 'F16', fill: synth.fill, shapeOf: (k) => vaeShapes.get(k) });
    let t0 = now();
    const vae = await Krea2Vae.load(e, vaeCkpt.checkpoint, vaeCfg, { dtype });
    const transformer = await Krea2Transformer.load(e, ditCkpt.checkpoint, dit, { dtype, int8 });
    const conditioner = await Krea2Conditioner.load(e, textCkpt.checkpoint, text, { dtype, selectLayers: taps, vision: { config: vision, processor: QWEN3_VL_IMAGE_PROCESSOR } });
    await e.sync();
    console.log(`load: ${fmt(now() - t0)} (random weights made${int8 ? ', DiT quantised' : ''} and uploaded), ${gib(e.pool.stats().inUseBytes)} on the GPU`);
    // a template-like sequence: 34 prefix ids (dropped), the prompt's ids, the 5-token suffix
    const ids = [...Array.from({ length: 34 }, (_, i) => 151644 + (i % 2)), ...Array.from({ length: o.promptTokens }, (_, i) => 1000 + ((i * 7919) % 20000)), 151645, 198, 151644, 77091, 198]
      .map((id) => id % (text.vocabSize - 1));
    try {
      const tapsT = conditioner.encodeIds(ids, 34);
      const context = transformer.context(tapsT);
      tapsT.free();
      try {
        for (const size of o.sizes) {
          const h = size / 16;
          const geo = transformer.geometry(context.shape[1]!, h, h);
          const x = e.upload(new Float32Array(h * h * dit.tokenDim).fill(0.1), [1, h * h, dit.tokenDim], transformer.dtype);
          try {
            const step = async () => {
              const s = now();
              transformer.forward({ img: x, context, sigma: 0.7, geometry: geo }).sample.free();
              await e.sync();
              return now() - s;
            };
            const first = await step();
            let best = Infinity;
            for (let i = 0; i < 3; i++) best = Math.min(best, await step());
            const flops = krea2StepFlops(dit, context.shape[1]!, h * h);
            const rate = flops / (best / 1000); // FLOP/s
            const big = flops >= 1e11;
            console.log(`step @ ${size}x${size} (${h * h} image + ${context.shape[1]} text tokens): ${fmt(best)}, ${big ? `${(flops / 1e12).toFixed(2)} TFLOP` : `${(flops / 1e9).toFixed(3)} GFLOP`} -> ` +
              `${big ? `${(rate / 1e12).toFixed(1)} TFLOP/s` : `${(rate / 1e9).toFixed(2)} GFLOP/s`} (first: ${fmt(first)})`);
            if (o.loraRank) {
              const weights = krea2LoraWeights(transformer);
              const file = randomLora(krea2LoraNames(dit), weights, o.loraRank);
              const on = attachLoras(e, weights, [{ file, scale: 1 }], transformer.dtype);
              try {
                const firstLora = await step();
                let bestLora = Infinity;
                for (let i = 0; i < 3; i++) bestLora = Math.min(bestLora, await step());
                console.log(`step @ ${size}x${size} with a rank-${o.loraRank} LoRA on ${on.linears} linears (${(on.bytes / 2 ** 20).toFixed(1)} MiB of terms): ${fmt(bestLora)}, ` +
                  `+${fmt(bestLora - best)} (${(((bestLora - best) / best) * 100).toFixed(1)} %) (first: ${fmt(firstLora)})`);
              } finally {
                on.detach();
              }
            }
            if (e.profiler) {
              await e.profiler.reset();
              await step();
              console.log(`GPU time per kernel [grid], one step @ ${size}x${size} (KILN_PROFILE=1: each dispatch in a pass of its own, the step times above too):`);
              for (const line of formatProfile(await e.profiler.report(), 20)) console.log(`  ${line}`);
            }
          } finally {
            geo.free();
            x.free();
          }
        }
        if (o.jobSize > 0) {
          const h = o.jobSize / 8;
          const z = e.upload(krea2Noise(2, vaeCfg.zDim, h, h), [1, h, h, vaeCfg.zDim], dtype);
          const decode = async () => {
            const s = now();
            const px = vae.decode(z);
            await e.read(px);
            px.free();
            return now() - s;
          };
          const first = await decode();
          console.log(`VAE decode @ ${o.jobSize}x${o.jobSize} (read back): ${fmt(await decode())} (first: ${fmt(first)})`);
          z.free();
        }
      } finally {
        context.free();
      }
      if (o.job && o.jobSize > 0) {
        t0 = now();
        const tp = conditioner.encodeIds(ids, 34);
        const ctx = transformer.context(tp);
        tp.free();
        await e.sync();
        const encodeMs = now() - t0;
        const t1 = now();
        const h = o.jobSize / 8;
        const tokens = await sampleKrea2(e, transformer, { context: ctx, cfg: 1, steps: o.steps, width: o.jobSize, height: o.jobSize, noise: krea2Noise(1, dit.channels, h, h) });
        const sampleMs = now() - t1;
        ctx.free();
        const t2 = now();
        // the pipeline unpatchifies on the host; here the tokens' values do not matter, so a latent of their size
        tokens.free();
        const z = e.upload(krea2Noise(3, vaeCfg.zDim, h, h), [1, h, h, vaeCfg.zDim], dtype);
        const px = vae.decode(z);
        z.free();
        await e.read(px);
        px.free();
        const decodeMs = now() - t2;
        console.log(`job @ ${o.jobSize}x${o.jobSize}, ${o.steps} steps: ${fmt(now() - t0)} (prompt ${fmt(encodeMs)}, sampling ${fmt(sampleMs)} = ${fmt(sampleMs / o.steps)} per step, VAE decode ${fmt(decodeMs)})`);
        // the prompt encode with one style reference at about 384 x 384 (vision tower, the longer prefill)
        const size = referenceSize(KREA2_STYLE_AREA, 384, 384);
        const n = size.width * size.height;
        const image = { data: new Float32Array(3 * n).map((_, i) => ((i * 2654435761) % 1000) / 500 - 1), shape: [3, size.height, size.width] as [3, number, number] };
        const refIds = [...ids.slice(0, 34), 5, 6, 7, 8, 9, vision.imageTokenId, 10, 11];
        const input = imagePatches(image, vision, QWEN3_VL_IMAGE_PROCESSOR, 'style reference');
        const t3 = now();
        const withRef = conditioner.encodeWithImages([...refIds, ...ids.slice(34)], refIds.length, [input]);
        await e.sync();
        withRef.free();
        console.log(`prompt encode with one ${size.width}x${size.height} style reference: ${fmt(now() - t3)} (without: ${fmt(encodeMs)})`);
      }
      console.log(`peak GPU memory: ${gib(e.pool.stats().peakInUseBytes)} in use (${gib(e.pool.stats().peakAllocatedBytes)} allocated by the pool)`);
    } finally {
      transformer.free();
      conditioner.free();
      vae.free();
    }
  } finally {
    await e.shutdown();
  }
}

/** Steps of the Turbo profiles (the job's default). */
export const KREA2_BENCH_STEPS = KREA2_TURBO_STEPS;

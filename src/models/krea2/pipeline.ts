// Krea 2 Turbo as a service pipeline (profiles imgart_turbo: 16-bit, imgart_turbo_int8: int8 DiT linears), the
// sample() of krea-ai/krea-2 sampling.py with Turbo's settings (docs/models/krea-2.md "Pipeline"). One job:
//   style references (0..3) -> decoded RGB at about 384 x 384 -> Qwen3-VL-4B's vision tower   (conditioner.ts)
//   prompt (+ references) -> template -> Qwen3-VL-4B -> 12 taps per token -> text fusion + txtmlp = context
//   noise (1, 16, H/8, W/8) from the seed (seededNoise, channel-major) -> patch tokens (patchify.ts)
//   sigmas: 8 steps at mu 1.15 (sigmas.ts) -> steps x [DiT -> Euler]       progress per step, cancel between steps
//   (cfg > 1: the negative prompt too, v = v_neg + cfg (v - v_neg): sampling.py's CFG with guidance cfg - 1)
//   tokens -> latent -> VAE decode (vae.ts, it un-normalises) -> RGB in [-1, 1] -> 8-bit as sampling.py
//   ((x + 1) / 2 * 255, truncated) -> png (media)
// Loading reads the three sources the official inference.py loads (layout.ts's Krea2Layout: real weights or the demo).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { throwIfCancelled } from '../../common/errors';
import { STAGE, referenceSize } from '../../catalog';
import type { Engine } from '../../engine/engine';
import { comfyDiffusionPrefix } from '../../engine/comfy-keys';
import { Checkpoint } from '../../engine/safetensors';
import type { Tensor } from '../../engine/tensor';
import { writePng } from '../../media';
import { assertFiniteOutput, OVERFLOW_HINT } from '../common/finite-output';
import type { ImageJobTask } from '../common/image-task';
import { oneOff, ResidentPipeline, stepReporter, type RunContext } from '../common/pipeline';
import { guidedEuler, type DenoisedPreview } from '../common/guided-euler';
import { denoisedPreview, fitLatentProjection, projectLatents, type LatentProjection } from '../common/latent-preview';
import type { LoraTarget } from '../common/lora-linear';
import { krea2LoraNames, krea2LoraWeights } from '../common/lora-models';
import { loadReferenceImages } from '../common/reference-images';
import { defaultComputeDType, type ComputeDType } from '../common/weights';
import { blockPlacement, placeBlocks, placedWeightBytes, sizedOnShapeEngine, streamTextLayers, TextEncoderResidency, type ImageResidencyOptions } from '../common/image-residency';
import { seededNoise } from '../qwen_image21/pipeline';
import { isSingleFile, krea2ConditionerFromFile, krea2VaeFromFile } from './comfy-parts';
import { KREA2_STYLE_AREA, Krea2Conditioner } from './conditioner';
import { inferKrea2Config } from './config';
import { krea2Patchify, krea2Unpatchify } from './patchify';
import { KREA2_TURBO_MU, krea2Sigmas, krea2StepSize } from './sigmas';
import { Krea2Transformer } from './transformer';
import { Krea2Vae } from './vae';

/** Where the three parts are: the DiT's safetensors file, the Qwen3-VL-4B-Instruct folder (with its tokenizer), the VAE folder. */
const fail = (message: string): never => {
  throw new Error(message);
};

export interface Krea2Layout {
  transformer: string;
  textEncoder: string;
  vae: string;
  /** The tokenizer folder for a text encoder given as one file (ComfyUI's: comfy-parts.ts QWEN3_VL_TOKENIZER_DIR). */
  tokenizer?: string;
}

/**
 * The layout of a checkpoint root with transformer/ (one .safetensors: the DiT), text_encoder/ and vae/ (the demo's),
 * or of the three real folders: `transformerDir` must hold exactly one .safetensors file (its name in the gated
 * krea/Krea-2-Turbo repo is not known here, so any name is taken).
 */
export function krea2Layout(transformerDir: string, textEncoder: string, vae: string): Krea2Layout {
  // the DiT file itself, safetensors or GGUF (found in ComfyUI's diffusion_models/: src/weights/comfyui.ts)
  if (/\.(safetensors|gguf)$/.test(transformerDir) && existsSync(transformerDir) && statSync(transformerDir).isFile()) return { transformer: transformerDir, textEncoder, vae };
  const files = readdirSync(transformerDir).filter((f) => f.endsWith('.safetensors') && !f.startsWith('.'));
  if (files.length !== 1) throw new Error(`Krea 2: ${transformerDir} must hold exactly one .safetensors file (the DiT), found ${files.length ? files.join(', ') : 'none'}`);
  return { transformer: join(transformerDir, files[0]!), textEncoder, vae };
}

/** The demo checkpoint's layout (demo.ts). */
export const krea2DemoLayout = (root: string): Krea2Layout => krea2Layout(join(root, 'transformer'), join(root, 'text_encoder'), join(root, 'vae'));

/** What one image job asks for (the GPU worker builds it from its task: src/worker/profiles/image.ts). */
export interface Krea2ImageTask extends ImageJobTask {
  /** 1 (the profile's): no CFG, as Turbo is distilled to run; > 1: true CFG with the negative prompt. */
  cfg: number;
  /** Output size in pixels, multiples of 16 (the DiT's patch grid). */
  width: number;
  /** Style reference image files (0..3), "Style reference 1..N" in order. */
  references: string[];
}

/** The sampling's (and the decode's) working set per latent patch token, the residency policy's estimate: the plans
 * of imgart_turbo at 1K and 2K (docs/performance.md "Plans", resident) hold at most 0.24 MiB a token beside the weights
 * (the VAE decode: 0.95 GiB at 1K, 3.82 GiB at 2K; the sampling half that), so 0.5 MiB (twice with CFG) plus a fixed
 * 0.5 GiB errs high. It was 1.5 MiB when it only moved the text encoder; with the DiT's blocks streamed on it (a
 * whole DiT uploaded a step) erring that high would stream imgart_turbo_int8 at 2K on a 24 GB card for nothing. */
const SAMPLING_BYTES_PER_TOKEN = 2 ** 19;
const SAMPLING_FIXED_BYTES = 2 ** 29;

/** The policy's estimate of a job's sampling working set (the fixed part alone without a job). */
function samplingWorkingBytes(task: Krea2ImageTask | undefined, patch: number): number {
  if (!task) return SAMPLING_FIXED_BYTES;
  const cell = 8 * patch;
  return (task.cfg > 1 ? 2 : 1) * Math.ceil(task.height / cell) * Math.ceil(task.width / cell) * SAMPLING_BYTES_PER_TOKEN + SAMPLING_FIXED_BYTES;
}

export interface Krea2PipelineOptions extends ImageResidencyOptions {
  engine(): Promise<Engine>;
  /** The parts to load: real weights, or the demo checkpoint (generated on first use). */
  layout(e: Engine, signal: AbortSignal): Promise<Krea2Layout>;
  /** imgart_turbo_int8: true. */
  int8: boolean;
  /** Compute dtype (default f16 where the adapter has shader-f16, else f32). */
  dtype?: ComputeDType;
  onLoaded?(bytes: number, layout: Krea2Layout): void;
  /** Sees the final latent (1, 16, H/8, W/8) before the VAE (tests). */
  onSampled?(latent: Float32Array): void;
  /** Initial latent (1, C, h, w) for a task instead of its seed's (tests: the end-to-end golden gives upstream's draw). */
  noise?(task: Krea2ImageTask, channels: number, h: number, w: number): Float32Array;
  /** Sees the decoded RGB (1, H, W, 3) in [-1, 1] before it becomes 8-bit (tests). */
  onDecoded?(rgb: Float32Array, height: number, width: number): void;
}

interface Loaded {
  e: Engine;
  layout: Krea2Layout;
  transformer: Krea2Transformer;
  conditioner: Krea2Conditioner;
  vae: Krea2Vae;
  bytes: number;
  /** GPU bytes of the DiT and the VAE with every block resident (the block policy's weights). */
  allWeightBytes: number;
  /** Where the text encoder waits between encodings (common/image-residency.ts). */
  residency: TextEncoderResidency;
  /** Previews' latent-to-RGB projection, once fitted. */
  projection?: Promise<LatentProjection>;
}

/** The latent noise of a seed: (1, C, h, w) channel-major, value (c, y, x) = draw c h w + y w + x of the seed's stream. */
export function krea2Noise(seed: number, channels: number, h: number, w: number): Float32Array {
  const packed = seededNoise(seed, channels, h, w); // (h w, C)
  const out = new Float32Array(packed.length);
  const n = h * w;
  for (let t = 0; t < n; t++) for (let c = 0; c < channels; c++) out[c * n + t] = packed[t * channels + c]!;
  return out;
}

/** (C, n) channel-major values as (n, C). */
export function channelLast(planar: Float32Array, channels: number, n: number): Float32Array {
  const out = new Float32Array(planar.length);
  for (let c = 0; c < channels; c++) for (let t = 0; t < n; t++) out[t * channels + c] = planar[c * n + t]!;
  return out;
}

/** sampling.py's picture: clamp to [-1, 1], (x + 1) / 2 * 255 truncated to 8 bits; (H, W, 3) channels-last in. */
export function krea2Rgb8(data: Float32Array): Uint8Array {
  const out = new Uint8Array(data.length);
  for (let i = 0; i < data.length; i++) out[i] = Math.floor((Math.min(1, Math.max(-1, data[i]!)) * 0.5 + 0.5) * 255);
  return out;
}

export interface Krea2SampleRequest {
  /** (1, Lt, features): the transformer's context() of the prompt. */
  context: Tensor;
  /** The negative prompt's context, used when cfg > 1. */
  negative?: Tensor;
  cfg: number;
  steps: number;
  width: number;
  height: number;
  /** The initial latent (1, C, H/8, W/8), channel-major (krea2Noise). */
  noise: Float32Array;
  signal?: AbortSignal;
  /** After each step (its GPU work finished): progress and the runner's safe point. */
  onStep?(done: number, total: number): Promise<void> | void;
  /** Live previews of the denoised estimate (1, N, C p^2) patch tokens. */
  preview?: DenoisedPreview;
}

/**
 * The denoising loop: the noise patchified, Turbo's sigmas (mu 1.15), `steps` DiT passes (two with CFG) and Euler
 * updates. Returns the final patch tokens (1, N, C p^2) in the transformer's dtype; the caller frees them.
 */
export async function sampleKrea2(e: Engine, transformer: Krea2Transformer, r: Krea2SampleRequest): Promise<Tensor> {
  const cfg = transformer.config;
  const cell = 8 * cfg.patch;
  if (r.width % cell !== 0 || r.height % cell !== 0) throw new RangeError(`Krea 2: ${r.width}x${r.height} is not a multiple of ${cell} px`);
  const h = r.height / 8;
  const w = r.width / 8;
  const gridH = h / cfg.patch;
  const gridW = w / cfg.patch;
  if (r.noise.length !== cfg.channels * h * w) throw new RangeError(`Krea 2: ${r.noise.length} noise values for a (1, ${cfg.channels}, ${h}, ${w}) latent`);
  const tokens = krea2Patchify(r.noise, { batch: 1, channels: cfg.channels, height: h, width: w }, cfg.patch);
  let x: Tensor | null = e.upload(tokens, [1, gridH * gridW, cfg.tokenDim], transformer.dtype, 'krea2 noise');
  const negative = r.cfg > 1 ? r.negative : undefined;
  const sigmas = krea2Sigmas(r.steps, { mu: KREA2_TURBO_MU });
  let geo: ReturnType<Krea2Transformer['geometry']> | null = null;
  let negGeo: ReturnType<Krea2Transformer['geometry']> | null = null;
  try {
    const g = (geo = transformer.geometry(r.context.shape[1]!, gridH, gridW));
    const ng = (negGeo = negative ? transformer.geometry(negative.shape[1]!, gridH, gridW) : null);
    const noise = x;
    x = null; // the loop owns it now
    return await guidedEuler(e, {
      x: noise, steps: r.steps, cfg: r.cfg, signal: r.signal, onStep: r.onStep,
      velocity: (x, i) => transformer.forward({ img: x, context: r.context, sigma: sigmas[i]!, geometry: g }).sample,
      negative: negative && ng ? (x, i) => transformer.forward({ img: x, context: negative, sigma: sigmas[i]!, geometry: ng }).sample : undefined,
      dt: (i) => krea2StepSize(sigmas, i),
      denoised: r.preview && { ...r.preview, sigma: (i) => sigmas[i]! },
    });
  } finally {
    x?.free();
    geo?.free();
    negGeo?.free();
  }
}

export class Krea2Pipeline extends ResidentPipeline<Krea2ImageTask, Loaded> {
  constructor(private readonly o: Krea2PipelineOptions) {
    super();
  }

  protected async loadModel(ctx: RunContext, next?: Krea2ImageTask): Promise<Loaded> {
    const e = await this.o.engine();
    const layout = await this.o.layout(e, ctx.signal);
    throwIfCancelled(ctx.signal);
    const dtype: ComputeDType = this.o.dtype ?? defaultComputeDType(e);
    const before = e.pool.stats().inUseBytes;
    const held: { free(): void }[] = [];
    try {
      // a ComfyUI vae/ or text_encoders/ file is one file in ComfyUI's key names (comfy-parts.ts)
      const vae = isSingleFile(layout.vae) ? await krea2VaeFromFile(e, layout.vae, { dtype }) : await Krea2Vae.fromDir(e, layout.vae, { dtype });
      held.push(vae);
      throwIfCancelled(ctx.signal);
      const ckpt = await Checkpoint.open(layout.transformer);
      let transformer: Krea2Transformer;
      try {
        // a ComfyUI diffusion_models file keeps the same names under its model.diffusion_model. prefix
        const prefix = comfyDiffusionPrefix(ckpt.keys());
        const config = inferKrea2Config(ckpt, vae.config.zDim, prefix, layout.transformer);
        // the blocks to host memory as they load where the DiT, the VAE and `next`'s sampling exceed the budget
        const blocks = blockPlacement(this.o, e, () => e.pool.stats().inUseBytes - before, samplingWorkingBytes(next, config.patch));
        transformer = await Krea2Transformer.load(e, ckpt, config, { dtype, int8: this.o.int8, prefix, blocks });
      } finally {
        await ckpt.close();
      }
      held.push(transformer);
      throwIfCancelled(ctx.signal);
      // the residency policy: the text encoder's layers streamed when the whole of it would not fit beside the DiT
      const weightBytes = e.pool.stats().inUseBytes - before;
      const allWeightBytes = weightBytes + (transformer.stream.state?.gpuBytes ?? 0);
      const loadConditioner = (on: Engine, layersOnHost: boolean) => isSingleFile(layout.textEncoder)
        ? krea2ConditionerFromFile(on, layout.textEncoder, layout.tokenizer ?? fail(`Krea 2: ${layout.textEncoder} is one file with no tokenizer beside it, and the layout names none`), { dtype, styles: true, layersOnHost })
        : Krea2Conditioner.fromDir(on, layout.textEncoder, { dtype, styles: true, layersOnHost });
      let sized: Promise<number> | undefined;
      const textBytes = () => (sized ??= sizedOnShapeEngine(e, (shape) => loadConditioner(shape, false)));
      const streamed = await streamTextLayers(this.o, e, weightBytes, textBytes);
      ctx.stage(STAGE.loadTextEncoder);
      const conditioner = await loadConditioner(e, streamed);
      held.push(conditioner);
      if (conditioner.hiddenSize !== transformer.config.txtdim || conditioner.selectLayers.length !== transformer.config.txtlayers) {
        throw new Error(`Krea 2: the text encoder gives ${conditioner.selectLayers.length} taps of ${conditioner.hiddenSize}, the DiT reads ${transformer.config.txtlayers} of ${transformer.config.txtdim}`);
      }
      const bytes = e.pool.stats().inUseBytes - before;
      const model = conditioner.model;
      const layers = model.layerOffload;
      const residency = new TextEncoderResidency(e, conditioner, streamed, () => placedWeightBytes(transformer.stream, allWeightBytes), streamed ? await textBytes() : bytes - weightBytes,
        () => model.layerOffload?.uploadedBytes ?? 0, layers ? (2 * layers.gpuBytes) / layers.layers : 0);
      return { e, layout, transformer, conditioner, vae, bytes, allWeightBytes, residency };
    } catch (err) {
      for (const h of held) h.free();
      throw err;
    }
  }

  /** The loaded DiT's blocks placed for `next` (streamed or resident: common/image-residency.ts placeBlocks). */
  protected override async placeFor(m: Loaded, next: Krea2ImageTask): Promise<void> {
    await placeBlocks(this.o, m.e, m.transformer.stream, m.allWeightBytes, samplingWorkingBytes(next, m.transformer.config.patch), m.residency);
  }

  protected override afterLoad(m: Loaded): void {
    this.o.onLoaded?.(m.bytes, m.layout);
  }

  /** The loaded DiT's linears, for a job's LoRAs (lora-linear.ts withLoras); undefined while nothing is loaded. */
  loraTarget(): LoraTarget | undefined {
    const t = this.m?.transformer;
    if (!this.m || !t) return undefined;
    return { e: this.m.e, weights: krea2LoraWeights(t), dtype: t.dtype, names: krea2LoraNames(t.config) };
  }

  async run(task: Krea2ImageTask, ctx: RunContext): Promise<void> {
    const m = await this.loaded(ctx);
    const e = m.e;
    const cfg = m.transformer.config;
    const cell = 8 * cfg.patch;
    if (task.width % cell !== 0 || task.height % cell !== 0) throw new RangeError(`Krea 2: ${task.width}x${task.height} is not a multiple of ${cell} px`);
    const h = task.height / 8;
    const w = task.width / 8;

    await this.placeFor(m, task); // where load(ctx, task) did not already
    const working = samplingWorkingBytes(task, cfg.patch);

    ctx.stage(STAGE.encode);
    const held: Tensor[] = [];
    let x: Tensor | null = null;
    const encoding = m.residency.beforeEncode();
    try {
      const styles = await loadReferenceImages(task.references, (w, h) => referenceSize(KREA2_STYLE_AREA, w, h), ctx.signal);
      const condition = (prompt: string): Tensor => {
        const taps = m.conditioner.encode(prompt, styles);
        try {
          return m.transformer.context(taps);
        } finally {
          taps.free();
        }
      };
      const context = condition(task.prompt);
      held.push(context);
      const useCfg = task.cfg > 1;
      const negative = useCfg ? condition(task.negative) : null;
      if (negative) held.push(negative);
      await e.sync();
      throwIfCancelled(ctx.signal);
      const report = await m.residency.afterEncode(this.o, working, encoding, m.transformer.stream);
      this.o.onResidency?.(report);
      const uploadedBefore = m.transformer.stream.state?.uploadedBytes ?? 0;

      ctx.stage(STAGE.sample);
      ctx.progress(0, task.steps);
      const shape = { batch: 1, channels: cfg.channels, height: h, width: w };
      x = await sampleKrea2(e, m.transformer, {
        context, negative: negative ?? undefined, cfg: task.cfg, steps: task.steps, width: task.width, height: task.height,
        noise: this.o.noise?.(task, cfg.channels, h, w) ?? krea2Noise(task.seed, cfg.channels, h, w),
        signal: ctx.signal,
        onStep: stepReporter(ctx),
        preview: denoisedPreview(ctx, task.steps, async (x0) => projectLatents(await this.projection(m, ctx), channelLast(krea2Unpatchify(await e.read(x0), shape, cfg.patch), cfg.channels, h * w), h, w)),
      });
      report.samplingHostToGpuBytes = (m.transformer.stream.state?.uploadedBytes ?? 0) - uploadedBefore;
      report.steps = task.steps;
      for (const t of held.splice(0)) t.free();
      throwIfCancelled(ctx.signal);

      ctx.stage(STAGE.save);
      const latent = krea2Unpatchify(await e.read(x), shape, cfg.patch); // (1, C, h, w)
      x.free();
      x = null;
      this.o.onSampled?.(latent);
      assertFiniteOutput(latent, 'the sampled latents', OVERFLOW_HINT);
      const z = e.upload(channelLast(latent, cfg.channels, h * w), [1, h, w, cfg.channels], m.vae.dtype, 'krea2 latent');
      let pixels: Float32Array;
      try {
        const out = m.vae.decode(z); // (1, 8h, 8w, 3)
        try {
          pixels = await e.read(out);
        } finally {
          out.free();
        }
      } finally {
        z.free();
      }
      throwIfCancelled(ctx.signal);
      this.o.onDecoded?.(pixels, task.height, task.width);
      assertFiniteOutput(pixels, 'the decoded picture', OVERFLOW_HINT);
      await writePng(task.outputPath, { data: krea2Rgb8(pixels), width: task.width, height: task.height }, task.png, { signal: ctx.signal });
    } finally {
      x?.free();
      for (const t of held) t.free();
    }
  }

  /** The loaded model's latent-to-RGB projection for previews, fitted at its first preview against its own VAE
   * (work done once per loaded model: ctx.oneOff times it, and the ETA leaves it out). */
  private projection(m: Loaded, ctx: RunContext): Promise<LatentProjection> {
    const C = m.transformer.config.channels;
    m.projection ??= oneOff(ctx, () => fitLatentProjection({
      channels: C, grid: 16, samples: 2, seed: 46,
      decode: async (lat, g) => {
        const z = m.e.upload(lat, [1, g, g, C], m.vae.dtype, 'krea2 preview fit');
        const out = m.vae.decode(z); // (1, 8g, 8g, 3)
        z.free();
        try {
          return { rgb: krea2Rgb8(await m.e.read(out)), width: out.shape[2]!, height: out.shape[1]! };
        } finally {
          out.free();
        }
      },
    }));
    return m.projection;
  }

  protected freeModel(m: Loaded): void {
    m.transformer.free();
    m.conditioner.free();
    m.vae.free();
  }
}

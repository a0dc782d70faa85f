// Qwen-Image-2.1 as a service pipeline (profiles imgmain: int8 linears, imgmain_bf16: 16-bit), diffusers'
// QwenImage21Pipeline.__call__ (pipeline_qwenimage21.py at 0a1f3676; docs/models/qwen-image-2.1.md "Pipeline").
// One job:
//   references (editing, "Picture 1..N") -> decoded RGB at about the res tier's area, sides multiples of 32
//     -> the Qwen3-VL vision tower (inside the text encoder) and VAE encode -> normalised latents (H/16 x W/16 x 64)
//   prompt (+ references) -> template -> Qwen3-VL -> conditioning (L, 4096) + which rows are reference slots
//                                                                                       (text-encoder.ts)
//   (cfg > 1: the negative prompt the same way; true CFG: v = v_neg + cfg (v_cond - v_neg), no rescale upstream)
//   noise (1, H/16 * W/16, 64) from the seed (seededNoise, channel-major like upstream's randn then packed)
//   schedule (sigmas.ts) -> steps x [transformer with the prefix K/V cache -> Euler]     progress per step
//   latents -> VAE decode (it un-normalises with latents_mean/std) -> RGBA -> RGB over white -> png (media)
// Loading reads a checkpoint folder in the published diffusers format (checkpoint.ts; real weights or the demo,
// demo.ts); reference pixels and the png's RGB are in references.ts.
import { throwIfCancelled } from '../../common/errors';
import type { Engine } from '../../engine/engine';
import type { Tensor } from '../../engine/tensor';
import { STAGE } from '../../catalog';
import { writePng } from '../../media';
import { assertFiniteOutput, OVERFLOW_HINT } from '../common/finite-output';
import type { ImageJobTask } from '../common/image-task';
import { oneOff, ResidentPipeline, stepReporter, type RunContext } from '../common/pipeline';
import type { LoraTarget } from '../common/lora-linear';
import { qwenImage21LoraNames, qwenImage21LoraWeights } from '../common/lora-models';
import { loadReferenceImages } from '../common/reference-images';
import { defaultComputeDType, type ComputeDType } from '../common/weights';
import { blockPlacement, placeBlocks, placedWeightBytes, sizedOnShapeEngine, streamTextLayers, TextEncoderResidency, type ImageResidencyOptions } from '../common/image-residency';
import { TextTokenizer } from '../tokenizer';
import { imageMaskWithTarget, jointSequence, type ImageShape, type JointSequence } from './joint-sequence';
import { guidedEuler, type DenoisedPreview } from '../common/guided-euler';
import { denoisedPreview, fitLatentProjection, pictureFromPlanar, projectLatents, type LatentProjection } from '../common/latent-preview';
import { eulerDt, flowMatchSchedule, modelTimestep, type FlowMatchConfig } from './sigmas';
import { QwenImage21Transformer, type QwenImage21PrefixCache } from './transformer';
import { QwenImage21Vae } from './vae';
import { loadQwenImage21TextEncoder, openAndLoadParts, qwenImage21Layout, readQwenImage21Configs, type QwenImage21Configs, type QwenImage21Layout, type QwenImage21Parts } from './checkpoint';
import { encodeReferences, referenceDimensions, rgbOverWhite } from './references';

/** What one image job asks for (the GPU worker builds it from its task: src/worker/profiles/image.ts). */
export interface QwenImageTask extends ImageJobTask {
  /** Used only when cfg > 1 (then also when empty, as upstream runs CFG with any given negative prompt). */
  negative: string;
  /** Output size in pixels, multiples of 32 (the service resolved tier, aspect, explicit size, size_from_ref). */
  width: number;
  /** Reference image files (editing), in "Picture 1..N" order. */
  references: string[];
  /** Pixels a reference is scaled to (about; aspect kept, sides multiples of 32, see referenceDimensions). */
  referenceArea: number;
}

// ---- seeded noise ----

/** splitmix32-style finaliser of a 32-bit counter: a different, well-mixed word per (seed, index). */
function mix32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x21f0aaad);
  x = Math.imul(x ^ (x >>> 15), 0x735a2d97);
  return (x ^ (x >>> 15)) >>> 0;
}

/**
 * Standard normal noise for the target latents, packed (tokens, channels) = (h * w, C) as upstream packs its
 * randn (1, C, 1, h, w): value (c, y, x) is draw number c * h * w + y * w + x of the seed's stream. Counter-based
 * (Box-Muller on two hashed uniforms per draw), so it depends on nothing but (seed, C, h, w).
 */
export function seededNoise(seed: number, channels: number, h: number, w: number): Float32Array {
  const n = h * w;
  const out = new Float32Array(n * channels);
  const key = mix32((seed >>> 0) ^ 0x9e3779b9);
  for (let c = 0; c < channels; c++) {
    for (let t = 0; t < n; t++) {
      const i = c * n + t;
      const u1 = (mix32(key ^ mix32(2 * i)) + 0.5) / 2 ** 32;
      const u2 = (mix32(key ^ mix32(2 * i + 1)) + 0.5) / 2 ** 32;
      out[t * channels + c] = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
    }
  }
  return out;
}

// ---- sampling ----

/** One prompt's conditioning: (1, L, hidden) in the transformer's dtype, and which rows are reference slots. */
export interface PromptCondition {
  embeds: Tensor;
  /** (L) true at the <|image_pad|> slots of the references (absent: text only). */
  imagePadMask?: readonly boolean[];
}

/** The references' packed latents (1, sum of h_i * w_i, C), normalised, and their shapes (1, h_i, w_i) in order. */
export interface ReferenceLatents {
  latents: Tensor;
  shapes: ImageShape[];
}

export interface SampleRequest {
  cond: PromptCondition;
  /** The negative prompt's conditioning (same references), used when cfg > 1. */
  negative?: PromptCondition;
  references?: ReferenceLatents;
  cfg: number;
  seed: number;
  steps: number;
  width: number;
  height: number;
  signal?: AbortSignal;
  /** After each step (the step's GPU work has finished): progress and the runner's safe point (RunContext.safePoint). */
  onStep?(done: number, total: number): Promise<void> | void;
  /** Initial latents (h * w, C) to use instead of seededNoise (the end-to-end golden gives upstream's draw to both). */
  noise?: Float32Array;
  /** Live previews of the denoised estimate (1, h * w, C). */
  preview?: DenoisedPreview;
}

/** The text-only joint sequence of a conditioning of `rows` tokens and a target of h x w latent tokens. */
export function textSequence(rows: number, h: number, w: number): JointSequence {
  return jointSequence(imageMaskWithTarget(new Array<boolean>(rows).fill(false), { height: h, width: w }), [[1, h, w]]);
}

/** The joint sequence of one prompt's conditioning (reference slots marked) and a target of h x w latent tokens. */
export function promptSequence(c: PromptCondition, references: readonly ImageShape[], h: number, w: number): JointSequence {
  const rows = c.embeds.shape[1]!;
  const mask = c.imagePadMask ?? new Array<boolean>(rows).fill(false);
  if (mask.length !== rows) throw new RangeError(`Qwen-Image-2.1: image-pad mask of ${mask.length} rows for a conditioning of ${rows}`);
  return jointSequence(imageMaskWithTarget(mask, { height: h, width: w }), [...references, [1, h, w]]);
}

/** Latent grid of a pixel size: 16x smaller per side, rounded down to a multiple of 2 (the pipeline's // 32 * 2). */
export function latentGrid(width: number, height: number): { h: number; w: number } {
  const h = 2 * Math.floor(height / 32);
  const w = 2 * Math.floor(width / 32);
  if (h < 2 || w < 2) throw new RangeError(`Qwen-Image-2.1: ${width}x${height} is smaller than 32x32`);
  return { h, w };
}

/**
 * The denoising loop: seeded noise, the flow-match schedule for this target size, `steps` transformer passes (two
 * per step with CFG, each prompt with its own prefix cache) and Euler updates. Returns the final latents
 * (1, h * w, C) in the transformer's dtype; the caller frees them.
 */
export async function sampleLatents(e: Engine, transformer: QwenImage21Transformer, sched: FlowMatchConfig, r: SampleRequest): Promise<Tensor> {
  const cfg = transformer.config;
  const { h, w } = latentGrid(r.width, r.height);
  const useCfg = r.cfg > 1 && r.negative !== undefined;
  const refShapes = r.references?.shapes ?? [];
  const referenceLatents = r.references?.latents;
  const condSequence = promptSequence(r.cond, refShapes, h, w);
  const negSequence = useCfg ? promptSequence(r.negative!, refShapes, h, w) : null;
  const schedule = flowMatchSchedule(sched, r.steps, condSequence.targetLength);
  const caches: QwenImage21PrefixCache[] = [];
  // null once handed to the caller, so the finally below frees it only on a throw
  const noise = r.noise ?? seededNoise(r.seed, cfg.inChannels, h, w);
  if (noise.length !== h * w * cfg.inChannels) throw new RangeError(`Qwen-Image-2.1: ${noise.length} noise values for ${h * w} tokens of ${cfg.inChannels}`);
  let x: Tensor | null = e.upload(noise, [1, h * w, cfg.inChannels], transformer.dtype, 'qi21 noise');
  try {
    const condCache = transformer.createCache(condSequence);
    caches.push(condCache);
    const negCache = negSequence ? transformer.createCache(negSequence) : null;
    if (negCache) caches.push(negCache);
    const latents = x;
    x = null; // the loop owns it now
    return await guidedEuler(e, {
      x: latents, steps: r.steps, cfg: r.cfg, signal: r.signal, onStep: r.onStep,
      velocity: (x, i) => transformer.forward({ sequence: condSequence, encoderHiddenStates: r.cond.embeds, referenceLatents, latents: x, timestep: modelTimestep(schedule, i), cache: condCache }).sample,
      negative: negCache
        ? (x, i) => transformer.forward({ sequence: negSequence!, encoderHiddenStates: r.negative!.embeds, referenceLatents, latents: x, timestep: modelTimestep(schedule, i), cache: negCache }).sample
        : undefined,
      dt: (i) => eulerDt(schedule, i),
      denoised: r.preview && { ...r.preview, sigma: (i) => schedule.sigmas[i]! },
    });
  } finally {
    x?.free();
    for (const c of caches) c.free();
  }
}

// ---- the service pipeline ----

interface Loaded {
  e: Engine;
  dir: string;
  configs: QwenImage21Configs;
  parts: QwenImage21Parts;
  vae: QwenImage21Vae;
  bytes: number;
  /** GPU bytes of the DiT and the VAE with every block resident (the block policy's weights). */
  allWeightBytes: number;
  /** Where the text encoder waits between encodings (common/image-residency.ts). */
  residency: TextEncoderResidency;
  /** Previews' latent-to-RGB projection, once fitted. */
  projection?: Promise<LatentProjection>;
}

/** The sampling's (and the decode's) working set per target latent token, the residency policy's estimate: the plans
 * at 1K and 2K (docs/performance.md "Plans") hold 2.78 and 11.13 GiB over 4,096 and 16,384 tokens (0.7 MiB a token),
 * so 1 MiB a token (twice with CFG's second prefix cache) plus a fixed 0.5 GiB errs high. */
const SAMPLING_BYTES_PER_TOKEN = 2 ** 20;
const SAMPLING_FIXED_BYTES = 2 ** 29;

/** The policy's estimate of a job's sampling working set (the fixed part alone without a job). */
function samplingWorkingBytes(task: QwenImageTask | undefined): number {
  if (!task) return SAMPLING_FIXED_BYTES;
  const { h, w } = latentGrid(task.width, task.height);
  return (task.cfg > 1 ? 2 : 1) * h * w * SAMPLING_BYTES_PER_TOKEN + SAMPLING_FIXED_BYTES;
}

export interface QwenImage21PipelineOptions extends ImageResidencyOptions {
  engine(): Promise<Engine>;
  /** The checkpoint folder: real weights, or the demo checkpoint (generated on first use); or where each part is (the
   * weights check may find parts in different places: a ComfyUI file, checkpoint.ts QwenImage21Layout). */
  checkpoint(e: Engine, signal: AbortSignal): Promise<string | QwenImage21Layout>;
  /** imgmain: true. */
  int8: boolean;
  /** Compute dtype (default f16 where the adapter has shader-f16, else f32; the end-to-end golden runs f32). */
  dtype?: ComputeDType;
  /** Told the GPU bytes held once loaded. */
  onLoaded?(bytes: number, dir: string): void;
  /** Initial latents for a task instead of its seed's (tests: the end-to-end golden injects upstream's draw). */
  noise?(task: QwenImageTask, channels: number, h: number, w: number): Float32Array;
  /** Sees the final latents (h * w, C) before the VAE (tests). */
  onSampled?(latents: Float32Array): void;
  /** Sees the decoded RGBA (1, H, W, 4) in [-1, 1] before it becomes the png's RGB (tests). */
  onDecoded?(rgba: Float32Array, height: number, width: number, channels: number): void;
}

/** The 'image' pipeline of imgmain / imgmain_bf16 (the GPU worker serves it: src/worker/profiles/image.ts). */
export class QwenImage21Pipeline extends ResidentPipeline<QwenImageTask, Loaded> {
  constructor(private readonly o: QwenImage21PipelineOptions) {
    super();
  }

  protected async loadModel(ctx: RunContext, next?: QwenImageTask): Promise<Loaded> {
    const e = await this.o.engine();
    const at = await this.o.checkpoint(e, ctx.signal);
    const layout = typeof at === 'string' ? qwenImage21Layout(at) : at;
    const dir = layout.root;
    throwIfCancelled(ctx.signal);
    const configs = await readQwenImage21Configs(layout);
    const tokenizer = await TextTokenizer.fromDir(layout.processor);
    const dtype: ComputeDType = this.o.dtype ?? defaultComputeDType(e);
    const before = e.pool.stats().inUseBytes;
    // The encoder half serves reference images: loaded when the text encoder can take them too.
    const vae = await QwenImage21Vae.load(e, layout.vae, { dtype, encoder: configs.vision !== null });
    try {
      if (vae.config.zDim !== configs.transformer.inChannels) {
        throw new Error(`Qwen-Image-2.1: the VAE's z_dim ${vae.config.zDim} is not the transformer's in_channels ${configs.transformer.inChannels}`);
      }
      throwIfCancelled(ctx.signal);
      // 加载模型 covers the VAE and the transformer (the scheduler set it); the text encoder has its own stage.
      // the whole text encoder's GPU bytes, sized on a shape-only engine (headers read) when the policy asks
      let sized: Promise<number> | undefined;
      const textBytes = () => (sized ??= sizedOnShapeEngine(e, (shape) =>
        loadQwenImage21TextEncoder(shape, layout, configs, { dtype, references: configs.vision !== null })));
      let weightBytes = 0;
      const streamText = async () => streamTextLayers(this.o, e, (weightBytes = e.pool.stats().inUseBytes - before), textBytes);
      // the blocks to host memory as they load where the DiT, the VAE and `next`'s sampling exceed the budget
      const blocks = blockPlacement(this.o, e, () => e.pool.stats().inUseBytes - before, samplingWorkingBytes(next));
      const parts = await openAndLoadParts(e, layout, configs, { dtype, int8: this.o.int8, streamTextLayers: streamText, blocks }, tokenizer, ctx.signal, () => ctx.stage(STAGE.loadTextEncoder));
      const bytes = e.pool.stats().inUseBytes - before;
      try {
        const model = parts.textEncoder.model;
        const stream = parts.transformer.stream;
        // weightBytes: what the DiT and the VAE held when the text encoder's choice was asked for (streamText)
        const allWeightBytes = weightBytes + (stream.state?.gpuBytes ?? 0);
        const layers = model.layerOffload;
        const residency = new TextEncoderResidency(e, parts.textEncoder, parts.textStreamed, () => placedWeightBytes(stream, allWeightBytes), parts.textStreamed ? await textBytes() : bytes - weightBytes,
          () => model.layerOffload?.uploadedBytes ?? 0, layers ? (2 * layers.gpuBytes) / layers.layers : 0);
        return { e, dir, configs, parts, vae, bytes, allWeightBytes, residency };
      } catch (err) {
        parts.free();
        throw err;
      }
    } catch (err) {
      vae.free();
      throw err;
    }
  }

  /** The loaded DiT's blocks placed for `next` (streamed or resident: common/image-residency.ts placeBlocks). */
  protected override async placeFor(m: Loaded, next: QwenImageTask): Promise<void> {
    await placeBlocks(this.o, m.e, m.parts.transformer.stream, m.allWeightBytes, samplingWorkingBytes(next), m.residency);
  }

  protected override afterLoad(m: Loaded): void {
    this.o.onLoaded?.(m.bytes, m.dir);
  }

  /** The loaded transformer's linears, for a job's LoRAs (lora-linear.ts withLoras); undefined while nothing is loaded. */
  loraTarget(): LoraTarget | undefined {
    const t = this.m?.parts.transformer;
    if (!this.m || !t) return undefined;
    return { e: this.m.e, weights: qwenImage21LoraWeights(t), dtype: t.dtype, names: qwenImage21LoraNames(t.config) };
  }

  async run(task: QwenImageTask, ctx: RunContext): Promise<void> {
    const m = await this.loaded(ctx);
    const e = m.e;
    const { transformer, textEncoder } = m.parts;
    if (task.references.length > 0 && (!textEncoder.vision || !m.vae.encoder)) {
      throw new Error(`Qwen-Image-2.1: this checkpoint has no vision tower Kiln can load (text_encoder/config.json has no vision_config, or the text encoder is a ComfyUI file, whose tower's config is not known), so the ${task.references.length} reference image(s) cannot be used; send the prompt without images for text-to-image`);
    }

    await this.placeFor(m, task); // where load(ctx, task) did not already
    const working = samplingWorkingBytes(task);

    ctx.stage(STAGE.encode);
    const held: Tensor[] = [];
    const keep = (t: Tensor) => (held.push(t), t);
    let latents: Tensor | null = null;
    const encoding = m.residency.beforeEncode();
    try {
      const refImages = await loadReferenceImages(task.references, (w, h) => referenceDimensions(task.referenceArea, w, h), ctx.signal);
      const references = refImages.length ? { latents: keep(encodeReferences(e, m.vae, refImages)), shapes: refImages.map((im): ImageShape => [1, im.shape[1] / 16, im.shape[2] / 16]) } : undefined;
      const condition = (prompt: string): PromptCondition => {
        const c = textEncoder.encodePrompt(prompt, refImages);
        keep(c.embeds);
        return { embeds: c.embeds.reshape([1, c.embeds.shape[0]!, c.embeds.shape[1]!]), imagePadMask: c.imagePadMask };
      };
      const cond = condition(task.prompt);
      const negative = task.cfg > 1 ? condition(task.negative) : undefined;
      await e.sync();
      throwIfCancelled(ctx.signal);
      const report = await m.residency.afterEncode(this.o, working, encoding, transformer.stream);
      this.o.onResidency?.(report);
      const uploadedBefore = transformer.stream.state?.uploadedBytes ?? 0;

      ctx.stage(STAGE.sample);
      ctx.progress(0, task.steps);
      const grid = latentGrid(task.width, task.height);
      latents = await sampleLatents(e, transformer, m.configs.scheduler, {
        noise: this.o.noise?.(task, transformer.config.inChannels, grid.h, grid.w),
        cond, negative, references, cfg: task.cfg, seed: task.seed, steps: task.steps, width: task.width, height: task.height, signal: ctx.signal,
        onStep: stepReporter(ctx),
        preview: denoisedPreview(ctx, task.steps, async (x0) => projectLatents(await this.projection(m, ctx), await e.read(x0), grid.h, grid.w)),
      });
      report.samplingHostToGpuBytes = (transformer.stream.state?.uploadedBytes ?? 0) - uploadedBefore;
      report.steps = task.steps;
      for (const t of held.splice(0)) t.free();
      throwIfCancelled(ctx.signal);
      // the latents read back (1 MiB at 1K) to check them: a NaN there decodes to a flat picture, finite and wrong
      const sampled = await e.read(latents);
      this.o.onSampled?.(sampled);
      assertFiniteOutput(sampled, 'the sampled latents', OVERFLOW_HINT);

      ctx.stage(STAGE.save);
      const { h, w } = latentGrid(task.width, task.height);
      // (1, h*w, C) rows are row-major over (h, w): the VAE's channels-last (1, h, w, C) without a copy
      const pixels = m.vae.decode(latents.reshape([1, h, w, transformer.config.inChannels])); // (1, 16h, 16w, 4)
      latents.free();
      latents = null;
      const [, H, W, channels] = pixels.shape as [number, number, number, number];
      let data: Float32Array;
      try {
        data = await e.read(pixels);
      } finally {
        pixels.free();
      }
      throwIfCancelled(ctx.signal);
      this.o.onDecoded?.(data, H, W, channels);
      assertFiniteOutput(data, 'the decoded picture', OVERFLOW_HINT);
      const rgb = rgbOverWhite(data, H, W, channels);
      await writePng(task.outputPath, { data: rgb, shape: [3, H, W] }, task.png, { signal: ctx.signal });
    } finally {
      latents?.free();
      for (const t of held) t.free();
    }
  }

  /** The loaded model's latent-to-RGB projection for previews, fitted at its first preview against its own VAE
   * (work done once per loaded model: ctx.oneOff times it, and the ETA leaves it out). */
  private projection(m: Loaded, ctx: RunContext): Promise<LatentProjection> {
    m.projection ??= oneOff(ctx, () => fitLatentProjection({
      channels: m.parts.transformer.config.inChannels, grid: 16, samples: 2, seed: 46,
      decode: async (lat, g) => {
        const t = m.e.upload(lat, [1, g, g, m.parts.transformer.config.inChannels], m.parts.transformer.dtype, 'qi21 preview fit');
        const px = m.vae.decode(t);
        t.free();
        const [, H, W, channels] = px.shape as [number, number, number, number];
        try {
          return pictureFromPlanar(rgbOverWhite(await m.e.read(px), H, W, channels), W, H);
        } finally {
          px.free();
        }
      },
    }));
    return m.projection;
  }

  protected freeModel(m: Loaded): void {
    m.vae.free();
    m.parts.free();
  }
}

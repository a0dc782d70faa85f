// Qwen-Image-2.1's transformer (diffusers QwenImage21Transformer2DModel): 32 single-stream blocks over one joint
// sequence [text + reference latents | target latents] (joint-sequence.ts), one modulation shared by all blocks
// (modulation.ts), block-causal attention, 3-axis RoPE. Field names are the checkpoint's keys, so loading needs no
// mapping table:
//   time_text_embed.timestep_embedder.linear_{1,2}   256 -> D -> D (no biases anywhere in the model)
//   txt_in.text_norm (zero-centred RMSNorm: scale = weight + 1), txt_in.in_layer (+ GELU tanh), txt_in.out_layer
//   img_in                                           C_in -> D
//   modulation.1                                     D -> 4D (modulation.0 is the SiLU)
//   transformer_blocks.N.*                           block.ts
//   norm_out.linear (D -> D, scale only), proj_out   D -> C_out
//
// Data flow (B samples sharing one joint sequence and one timestep):
//   prefix (B, Lp, D) = text rows of txt_in(encoder states) interleaved with img_in(reference latents), per sequence.runs
//   target (B, Lt, D) = img_in(noisy latents)
//   prefix through every block (t = 0 row, block-causal), its K/V left in the cache;   <- once per job (causal_condition)
//   target through every block (t row, attends to [prefix K/V | own K/V])              <- every step
//   sample (B, Lt, C_out) = proj_out(LN(target) * (1 + norm_out scale))
// Upstream's output covers the whole joint sequence; the pipeline keeps only the target rows, which is all this
// returns. Prefix-major order gives the same numbers as upstream's layer-major one: prefix tokens never see target
// tokens, so layer i of the prefix needs nothing of the target.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Engine } from '../../engine/engine';
import { silu } from '../../engine/ops/activation';
import { copyInto } from '../../engine/ops/layout';
import { linear } from '../common/lora-linear'; // the engine's linear plus attached LoRA terms
import { layerNorm, rmsNorm } from '../../engine/ops/norm';
import { Checkpoint } from '../../engine/safetensors';
import { fmtShape, type Tensor } from '../../engine/tensor';
import { freeLinear, loadLinear, loadPlain, type ComputeDType, type LinearWeight, type WeightLoader } from '../common/weights';
import { BlockStream, loadedSince, type BlockPlacement } from '../common/block-stream';
import { QwenImage21Block, type BlockPart, type LayerKv } from './block';
import { parseQwenImage21Config, type QwenImage21Config } from './config';
import { ropeRows, type JointSequence } from './joint-sequence';
import { modRow, tanhGates, TIMESTEP_DIM, timestepSinusoid } from './modulation';

export interface QwenImage21LoadOptions {
  /** Compute dtype (activations, norms; linears too unless int8). Default f16. */
  dtype?: ComputeDType;
  /** Linear weights as weight-only int8 with per-output-channel scales, quantised at load (imgmain). */
  int8?: boolean;
  /** Key prefix in the checkpoint (default none: the transformer/ folder's own keys). */
  prefix?: string;
  /** Load only the first N blocks (tests of one block); forward needs all. */
  layers?: number;
  /** Where the blocks go as they load (default 'gpu'; 'host': streamed while sampling, common/block-stream.ts; a
   * function decides from the first block's pool bytes: the residency policy, common/image-residency.ts). */
  blocks?: BlockPlacement;
}

/** The timestep path's results for rows [t, 0] (causal_condition) or [t]. */
export interface TimeEmbedding {
  /** (R, D) */
  temb: Tensor;
  /** (R, 4D) with tanh applied to the gate quarters. */
  modulation: Tensor;
  /** (R, D) norm_out's scale. */
  normScale: Tensor;
  /** Row of the target tokens, and of the prefix tokens. */
  targetRow: number;
  prefixRow: number;
  free(): void;
}

export interface QwenImage21Input {
  sequence: JointSequence;
  /** (B, sequence.encoderLength, contextInDim): the text encoder's states (system prompt dropped), reference slots
   * included. Needed whenever the prefix is computed (not when a filled cache is reused). */
  encoderHiddenStates?: Tensor;
  /** (B, sequence.referenceTokens, inChannels): the references' latents, packed in order. */
  referenceLatents?: Tensor;
  /** (B, sequence.targetLength, inChannels): the noisy target latents. */
  latents: Tensor;
  /** The value the pipeline passes upstream's transformer: the schedule's timestep / 1000 (shared by the batch). */
  timestep: number;
  /** Keeps the prefix's keys and values across steps (see createCache). Default: a temporary one. */
  cache?: QwenImage21PrefixCache;
  /** Also return every block's output (tests). */
  blockOutputs?: boolean;
}

export interface QwenImage21Output {
  /** (B, Lt, outChannels) velocity prediction for the target. */
  sample: Tensor;
  /** With blockOutputs: per block, the prefix part (null when it came from the cache) and the target part. */
  blocks?: { prefix: Tensor | null; target: Tensor }[];
}

/**
 * The per-layer keys and values of [prefix | target] (B, H, Lp + Lt, Dh) for one joint sequence, plus its RoPE tables and
 * block ids. Filled by the first forward; later forwards (later steps) reuse the prefix part and rewrite only the
 * target part. Valid only under causal_condition (the prefix then does not depend on the timestep).
 */
export class QwenImage21PrefixCache {
  readonly layers: LayerKv[] = [];
  /** The prefix part holds this sequence's keys and values. */
  filled = false;
  readonly prefixCos: Tensor | null;
  readonly prefixSin: Tensor | null;
  readonly targetCos: Tensor;
  readonly targetSin: Tensor;
  readonly blockIds: Tensor | null;
  private freed = false;

  constructor(
    e: Engine,
    cfg: QwenImage21Config,
    readonly sequence: JointSequence,
    readonly batch: number,
    readonly dtype: ComputeDType,
  ) {
    const { prefixLength: Lp, length: L } = sequence;
    const made: Tensor[] = [];
    const keep = (t: Tensor) => (made.push(t), t);
    try {
      const shape = [batch, cfg.numHeads, L, cfg.headDim];
      for (let i = 0; i < cfg.numLayers; i++) this.layers.push({ k: keep(e.empty(shape, dtype, `qi21 kv k${i}`)), v: keep(e.empty(shape, dtype, `qi21 kv v${i}`)) });
      const table = (a: number, b: number) => {
        const r = ropeRows(sequence, cfg.axesDimsRope, cfg.ropeTheta, a, b);
        return [keep(e.upload(r.cos, [r.rows, r.pairs], 'f32', 'qi21 rope cos')), keep(e.upload(r.sin, [r.rows, r.pairs], 'f32', 'qi21 rope sin'))] as const;
      };
      [this.targetCos, this.targetSin] = table(Lp, L);
      if (Lp > 0) {
        [this.prefixCos, this.prefixSin] = table(0, Lp);
        this.blockIds = keep(e.upload(sequence.blockIds, [Lp], 'f32', 'qi21 block ids'));
      } else {
        this.prefixCos = this.prefixSin = this.blockIds = null;
      }
    } catch (err) {
      for (const t of made) t.free();
      throw err;
    }
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    for (const l of this.layers) {
      l.k.free();
      l.v.free();
    }
    for (const t of [this.prefixCos, this.prefixSin, this.targetCos, this.targetSin, this.blockIds]) t?.free();
  }
}

export class QwenImage21Transformer {
  private constructor(
    private readonly e: Engine,
    readonly config: QwenImage21Config,
    readonly dtype: ComputeDType,
    readonly time_text_embed: { timestep_embedder: { linear_1: LinearWeight; linear_2: LinearWeight } },
    readonly txt_in: { text_norm: Tensor; in_layer: LinearWeight; out_layer: LinearWeight },
    readonly img_in: LinearWeight,
    /** modulation.1 (modulation.0 is the SiLU). */
    readonly modulation: readonly [null, LinearWeight],
    readonly transformer_blocks: QwenImage21Block[],
    readonly norm_out: { linear: LinearWeight },
    readonly proj_out: LinearWeight,
    /** The blocks' weights: resident, or streamed from host memory in turn (common/block-stream.ts). */
    readonly stream: BlockStream,
  ) {}

  static async load(e: Engine, ckpt: Checkpoint, config: QwenImage21Config, o: QwenImage21LoadOptions = {}): Promise<QwenImage21Transformer> {
    const dtype = o.dtype ?? 'f16';
    const p = o.prefix ?? '';
    const n = o.layers ?? config.numLayers;
    if (!Number.isInteger(n) || n < 0 || n > config.numLayers) throw new RangeError(`QwenImage21Transformer.load: layers ${n} not in 0..${config.numLayers}`);
    const w: WeightLoader = { e, ckpt, dtype, int8: !!o.int8, loaded: [] };
    const { dim: D, contextInDim: C, inChannels, outChannels } = config;
    try {
      const te = {
        linear_1: await loadLinear(w, `${p}time_text_embed.timestep_embedder.linear_1.weight`, [D, TIMESTEP_DIM]),
        linear_2: await loadLinear(w, `${p}time_text_embed.timestep_embedder.linear_2.weight`, [D, D]),
      };
      const txt = {
        text_norm: await loadPlain(w, `${p}txt_in.text_norm.weight`, [C]),
        in_layer: await loadLinear(w, `${p}txt_in.in_layer.weight`, [D, C]),
        out_layer: await loadLinear(w, `${p}txt_in.out_layer.weight`, [D, D]),
      };
      const imgIn = await loadLinear(w, `${p}img_in.weight`, [D, inChannels]);
      const mod = await loadLinear(w, `${p}modulation.1.weight`, [4 * D, D]);
      const blocks: QwenImage21Block[] = [];
      const stream = BlockStream.loading(e, n, o.blocks);
      for (let i = 0; i < n; i++) {
        const from = w.loaded.length;
        blocks.push(await QwenImage21Block.load(w, config, `${p}transformer_blocks.${i}.`));
        await stream.add(loadedSince(w.loaded, from)); // to host memory at once where the placement says so
      }
      const normOut = { linear: await loadLinear(w, `${p}norm_out.linear.weight`, [D, D]) };
      const projOut = await loadLinear(w, `${p}proj_out.weight`, [outChannels, D]);
      return new QwenImage21Transformer(e, config, dtype, { timestep_embedder: te }, txt, imgIn, [null, mod], blocks, normOut, projOut, stream.done());
    } catch (err) {
      for (const t of w.loaded) t.free();
      throw err;
    }
  }

  /** Loads the diffusers transformer/ folder: config.json + (sharded) diffusion_pytorch_model safetensors. */
  static async fromDir(e: Engine, dir: string, o: QwenImage21LoadOptions = {}): Promise<QwenImage21Transformer> {
    const path = join(dir, 'config.json');
    const config = parseQwenImage21Config(JSON.parse(await readFile(path, 'utf8')), path);
    const ckpt = await Checkpoint.open(diffusersWeights(dir));
    try {
      return await QwenImage21Transformer.load(e, ckpt, config, o);
    } finally {
      await ckpt.close();
    }
  }

  /** A prefix KV cache for one joint sequence and batch size (free it when the job ends). */
  createCache(sequence: JointSequence, batch = 1): QwenImage21PrefixCache {
    return new QwenImage21PrefixCache(this.e, this.config, sequence, batch, this.dtype);
  }

  /** temb, the shared modulation (tanh'd gates) and norm_out's scale for one timestep. */
  timeEmbedding(timestep: number): TimeEmbedding {
    const e = this.e;
    const causal = this.config.causalCondition;
    const rows = causal ? [timestep, 0] : [timestep];
    const { linear_1, linear_2 } = this.time_text_embed.timestep_embedder;
    // the sinusoid, hidden rows, silu(temb) and the raw gates freed by the scope (a row or two: no peak to keep)
    const { temb, modulation, normScale } = e.scope(() => {
      const sinus = e.upload(timestepSinusoid(rows), [rows.length, TIMESTEP_DIM], this.dtype, 'qi21 timestep sinusoid');
      const temb = linear(e, linear(e, sinus, linear_1, null, { act: 'silu' }), linear_2);
      const s = silu(e, temb);
      return { temb, modulation: tanhGates(e, linear(e, s, this.modulation[1])), normScale: linear(e, s, this.norm_out.linear) };
    });
    return {
      temb,
      modulation,
      normScale,
      targetRow: 0,
      prefixRow: causal ? 1 : 0,
      free() {
        temb.free();
        modulation.free();
        normScale.free();
      },
    };
  }

  /** txt_in: zero-centred RMSNorm (scale 1 + weight), in_layer + GELU (tanh), out_layer. (B, L, C) -> (B, L, D). */
  textIn(x: Tensor): Tensor {
    const e = this.e;
    return e.chain(
      () => rmsNorm(e, x, { eps: this.config.eps, scale: this.txt_in.text_norm }),
      (n) => linear(e, n, this.txt_in.in_layer, null, { act: 'gelu_tanh' }),
      (h) => linear(e, h, this.txt_in.out_layer),
    );
  }

  forward(input: QwenImage21Input): QwenImage21Output {
    const e = this.e;
    const cfg = this.config;
    const { sequence, latents } = input;
    if (this.transformer_blocks.length !== cfg.numLayers) throw new Error(`QwenImage21Transformer: forward needs ${cfg.numLayers} blocks, ${this.transformer_blocks.length} loaded`);
    const B = latents.shape[0]!;
    this.checkInput('latents', latents, [B, sequence.targetLength, cfg.inChannels]);
    const cache = input.cache ?? this.createCache(sequence, B);
    if (cache.sequence !== sequence || cache.batch !== B || cache.dtype !== this.dtype) {
      if (!input.cache) cache.free();
      throw new RangeError('QwenImage21Transformer: the cache was made for another joint sequence, batch size or dtype');
    }
    const blocks: { prefix: Tensor | null; target: Tensor }[] | undefined = input.blockOutputs ? [] : undefined;
    const time = this.timeEmbedding(input.timestep);
    try {
      const needPrefix = sequence.prefixLength > 0 && (!cache.filled || !cfg.causalCondition);
      const prefixOut = needPrefix ? this.runPrefix(input, B, cache, time, !!blocks) : [];
      if (needPrefix) cache.filled = cfg.causalCondition;
      const part: BlockPart = { mod: modRow(time.modulation, time.targetRow), cos: cache.targetCos, sin: cache.targetSin, start: sequence.prefixLength };
      // one chain: each step's input freed once its output exists (engine/scope.ts), as the hand-placed frees did
      const sample = e.chain(
        () => linear(e, latents, this.img_in),
        ...this.transformer_blocks.map((block, i) => (x: Tensor) => {
          const next = this.stream.with(i, () => block.forward(e, cfg, x, part, cache.layers[i]!)); // a streamed block uploaded for it
          if (blocks) blocks.push({ prefix: prefixOut[i] ?? null, target: e.keep(next) }); // kept block outputs are the caller's
          return next;
        }),
        (x) => layerNorm(e, x, { eps: cfg.eps, scale: time.normScale.slice(0, time.targetRow, time.targetRow + 1).unsqueeze(0) }),
        (n) => linear(e, n, this.proj_out),
      );
      return blocks ? { sample, blocks } : { sample };
    } finally {
      time.free();
      if (!input.cache) cache.free();
    }
  }

  /** Assembles the prefix and runs it through every block, leaving its K/V in the cache. Returns block outputs if asked. */
  private runPrefix(input: QwenImage21Input, B: number, cache: QwenImage21PrefixCache, time: TimeEmbedding, keep: boolean): Tensor[] {
    const e = this.e;
    const cfg = this.config;
    const { sequence } = input;
    const enc = input.encoderHiddenStates;
    if (!enc) throw new RangeError('QwenImage21Transformer: encoderHiddenStates are needed to compute the prefix (no filled cache)');
    this.checkInput('encoderHiddenStates', enc, [B, sequence.encoderLength, cfg.contextInDim]);
    const refs = input.referenceLatents;
    if (sequence.referenceTokens > 0) {
      if (!refs) throw new RangeError(`QwenImage21Transformer: the joint sequence has ${sequence.referenceTokens} reference tokens but no referenceLatents`);
      this.checkInput('referenceLatents', refs, [B, sequence.referenceTokens, cfg.inChannels]);
    }
    const part: BlockPart = { mod: modRow(time.modulation, time.prefixRow), cos: cache.prefixCos!, sin: cache.prefixSin!, start: 0, blockIds: cache.blockIds! };
    const outs: Tensor[] = [];
    // what the prefix leaves is its K/V in the cache: the last block's output is freed with the scope
    e.scope(() => {
      e.chain(
        () => {
          const text = this.textIn(enc); // text and reference tokens freed once copied into the prefix
          const refTokens = sequence.referenceTokens > 0 ? linear(e, refs!, this.img_in) : null;
          const x = e.empty([B, sequence.prefixLength, cfg.dim], this.dtype, 'qi21 prefix');
          for (const run of sequence.runs) {
            const src = run.kind === 'text' ? text.slice(1, run.encoderStart, run.encoderStart + run.end - run.start) : refTokens!.slice(1, run.latentStart, run.latentStart + run.end - run.start);
            copyInto(e, src, x.slice(1, run.start, run.end));
          }
          return x;
        },
        ...this.transformer_blocks.map((block, i) => (x: Tensor) => {
          const next = this.stream.with(i, () => block.forward(e, cfg, x, part, cache.layers[i]!));
          if (keep) outs.push(e.keep(next)); // the caller's (tests)
          return next;
        }),
      );
    });
    return outs;
  }

  private checkInput(name: string, t: Tensor, shape: number[]): void {
    if (t.dtype !== this.dtype) throw new TypeError(`QwenImage21Transformer: ${name} ${t} must be ${this.dtype}`);
    if (t.rank !== shape.length || t.shape.some((n, i) => n !== shape[i])) throw new RangeError(`QwenImage21Transformer: ${name} ${t} must be ${fmtShape(shape)}`);
  }

  free(): void {
    const { linear_1, linear_2 } = this.time_text_embed.timestep_embedder;
    for (const w of [linear_1, linear_2, this.txt_in.in_layer, this.txt_in.out_layer, this.img_in, this.modulation[1], this.norm_out.linear, this.proj_out]) freeLinear(w);
    this.txt_in.text_norm.free();
    for (const b of this.transformer_blocks) b.free();
  }
}

/** A diffusers model folder's weights: the sharded index, the single file, or (else) what Checkpoint.open finds. */
export function diffusersWeights(dir: string): string {
  for (const f of ['diffusion_pytorch_model.safetensors.index.json', 'diffusion_pytorch_model.safetensors']) {
    if (existsSync(join(dir, f))) return join(dir, f);
  }
  return dir;
}

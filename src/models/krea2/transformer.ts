// Krea 2's transformer (krea-ai/krea-2 mmdit.SingleStreamDiT), field names = the keys of the released file (its
// bare state dict):
//   first                 Linear(C p^2 -> D, bias) on patch tokens
//   tmlp.{0,2}            Linear(tdim -> D) + GELU(tanh) + Linear(D -> D), biases: t = tmlp(sinusoid(sigma))
//   tproj.1               GELU(tanh) (tproj.0) then Linear(D -> 6D, bias): tvec, shared by every block
//   blocks.N              SingleStreamBlock (blocks.ts), each adding its own mod.lin to tvec
//   txtfusion             TextFusionTransformer (text-fusion.ts)
//   txtmlp.{0,1,3}        RMSNorm(txtdim) + Linear(txtdim -> D) + GELU(tanh) + Linear(D -> D)
//   last                  scale, shift = t + last.modulation.lin rows 0, 1; linear((1 + scale) norm(x) + shift)
// Data flow for one step (B samples sharing the text length, the grid and sigma):
//   sequence (B, Lt + N, D) = [txtmlp(txtfusion(taps)) | first(img tokens)]; positions text (0,0,0), image (0,r,c)
//   every block over the whole sequence (full attention); the image rows of last(...) are the velocity (B, N, C p^2)
// The text part depends on the prompt only: the pipeline computes it once (context()) and passes it to every step.
import type { Engine } from '../../engine/engine';
import { geluTanh } from '../../engine/ops/activation';
import { add } from '../../engine/ops/elementwise';
import { concat } from '../../engine/ops/layout';
import { linear } from '../common/lora-linear'; // the engine's linear plus attached LoRA terms
import { rmsNorm } from '../../engine/ops/norm';
import { Checkpoint } from '../../engine/safetensors';
import { fmtShape, type Tensor } from '../../engine/tensor';
import { freeLinear, loadLinear, loadPlain, type ComputeDType, type LinearWeight, type WeightLoader } from '../common/weights';
import { BlockStream, loadedSince, type BlockPlacement } from '../common/block-stream';
import { Krea2SingleStreamBlock, loadNormScale, type RopeRows } from './blocks';
import { KREA2_EPS, type Krea2Config } from './config';
import { krea2Positions, krea2RopeTable } from './rope';
import { Krea2TextFusion, type TextFusionTrace } from './text-fusion';

export interface Krea2LoadOptions {
  /** Compute dtype (activations, norms; linears too unless int8). Default f16. */
  dtype?: ComputeDType;
  /** Linear weights as weight-only int8 with per-output-channel scales, quantised at load (imgart_turbo_int8). */
  int8?: boolean;
  /** Key prefix in the checkpoint (golden fixtures: "weight."; the released file: none). */
  prefix?: string;
  /** Where the blocks go as they load (default 'gpu'; 'host': streamed while sampling, common/block-stream.ts; a
   * function decides from the first block's pool bytes: the residency policy, common/image-residency.ts). */
  blocks?: BlockPlacement;
}

/** mmdit.temb: [cos(1000 t f_k), sin(1000 t f_k)], f_k = exp(-ln(1e4) k / (tdim / 2)), in upstream's float32 steps. */
export function krea2TimestepSinusoid(t: number, tdim: number): Float32Array {
  const f = Math.fround;
  const half = tdim / 2;
  const lnMax = f(-Math.log(1e4));
  const scaled = f(f(t) * 1000);
  const out = new Float32Array(tdim);
  for (let k = 0; k < half; k++) {
    const freq = f(Math.exp(f(f(lnMax * k) / half)));
    const arg = f(scaled * freq);
    out[k] = Math.cos(arg);
    out[half + k] = Math.sin(arg);
  }
  return out;
}

/** The timestep path for one sigma: t (1, 1, D) and tvec (1, 1, 6D). */
export interface Krea2TimeVectors {
  t: Tensor;
  tvec: Tensor;
  free(): void;
}

/** RoPE tables of one geometry (text length, patch grid), f32 (Lt + N, hd / 2). */
export interface Krea2Geometry extends RopeRows {
  textLength: number;
  gridH: number;
  gridW: number;
  free(): void;
}

export interface Krea2Input {
  /** (B, gridH gridW, C p^2) patch tokens (krea2Patchify). */
  img: Tensor;
  /** (B, Lt, D): context() of the prompt. */
  context: Tensor;
  /** sigma in [0, 1] (1 = noise), shared by the batch. */
  sigma: number;
  geometry: Krea2Geometry;
  /** Also return every block's output over the whole sequence (tests). */
  blockOutputs?: boolean;
}

export interface Krea2Output {
  /** (B, N, C p^2) velocity. */
  sample: Tensor;
  blocks?: Tensor[];
}

export class Krea2Transformer {
  private constructor(
    private readonly e: Engine,
    readonly config: Krea2Config,
    readonly dtype: ComputeDType,
    readonly first: { weight: LinearWeight; bias: Tensor },
    /** tmlp.0 and tmlp.2 (tmlp.1 is the GELU). */
    readonly tmlp: readonly [{ weight: LinearWeight; bias: Tensor }, null, { weight: LinearWeight; bias: Tensor }],
    /** tproj.1 (tproj.0 is the GELU). */
    readonly tproj: readonly [null, { weight: LinearWeight; bias: Tensor }],
    readonly blocks: Krea2SingleStreamBlock[],
    readonly txtfusion: Krea2TextFusion,
    /** txtmlp.0 (RMSNorm, as 1 + scale), txtmlp.1, txtmlp.3 (txtmlp.2 is the GELU). */
    readonly txtmlp: readonly [{ scale: Tensor }, { weight: LinearWeight; bias: Tensor }, null, { weight: LinearWeight; bias: Tensor }],
    readonly last: { norm: { scale: Tensor }; linear: { weight: LinearWeight; bias: Tensor }; modulation: { lin: Tensor } },
    /** The blocks' weights: resident, or streamed from host memory in turn (common/block-stream.ts). */
    readonly stream: BlockStream,
  ) {}

  static async load(e: Engine, ckpt: Checkpoint, config: Krea2Config, o: Krea2LoadOptions = {}): Promise<Krea2Transformer> {
    const dtype = o.dtype ?? 'f16';
    const p = o.prefix ?? '';
    const w: WeightLoader = { e, ckpt, dtype, int8: !!o.int8, loaded: [] };
    const { features: D, tdim, txtdim, tokenDim } = config;
    const lin = async (key: string, n: number, k: number) => ({ weight: await loadLinear(w, `${p}${key}.weight`, [n, k]), bias: await loadPlain(w, `${p}${key}.bias`, [n]) });
    try {
      const first = await lin('first', D, tokenDim);
      const tmlp = [await lin('tmlp.0', D, tdim), null, await lin('tmlp.2', D, D)] as const;
      const tproj = [null, await lin('tproj.1', 6 * D, D)] as const;
      const blocks: Krea2SingleStreamBlock[] = [];
      const stream = BlockStream.loading(e, config.layers, o.blocks);
      for (let i = 0; i < config.layers; i++) {
        const from = w.loaded.length;
        blocks.push(await Krea2SingleStreamBlock.load(w, `${p}blocks.${i}.`, D, config.heads, config.kvheads, config.mlpDim));
        await stream.add(loadedSince(w.loaded, from)); // to host memory at once where the placement says so
      }
      const txtfusion = await Krea2TextFusion.load(w, config, `${p}txtfusion.`);
      const txtmlp = [{ scale: await loadNormScale(w, `${p}txtmlp.0.scale`, txtdim) }, await lin('txtmlp.1', D, txtdim), null, await lin('txtmlp.3', D, D)] as const;
      const last = {
        norm: { scale: await loadNormScale(w, `${p}last.norm.scale`, D) },
        linear: await lin('last.linear', tokenDim, D),
        modulation: { lin: await loadPlain(w, `${p}last.modulation.lin`, [2, D]) },
      };
      return new Krea2Transformer(e, config, dtype, first, tmlp, tproj, blocks, txtfusion, txtmlp, last, stream.done());
    } catch (err) {
      for (const t of w.loaded) t.free();
      throw err;
    }
  }

  /** The released file: one safetensors holding SingleStreamDiT's state dict (no prefix). */
  static async fromFile(e: Engine, path: string, config: Krea2Config, o: Omit<Krea2LoadOptions, 'prefix'> = {}): Promise<Krea2Transformer> {
    const ckpt = await Checkpoint.open(path);
    try {
      return await Krea2Transformer.load(e, ckpt, config, o);
    } finally {
      await ckpt.close();
    }
  }

  /** t = tmlp(sinusoid(sigma)) (1, 1, D) and tvec = tproj(t) (1, 1, 6D). */
  timeVectors(sigma: number): Krea2TimeVectors {
    const e = this.e;
    const { tdim, features: D } = this.config;
    // the sinusoid, the hidden row and gelu(t) freed by the scope (a few rows of D: no peak to keep)
    const { t, tvec } = e.scope(() => {
      const sinus = e.upload(krea2TimestepSinusoid(sigma, tdim), [1, tdim], this.dtype, 'krea2 timestep sinusoid');
      const h = linear(e, sinus, this.tmlp[0].weight, this.tmlp[0].bias, { act: 'gelu_tanh' });
      const t = linear(e, h, this.tmlp[2].weight, this.tmlp[2].bias).reshape([1, 1, D]);
      return { t, tvec: linear(e, geluTanh(e, t), this.tproj[1].weight, this.tproj[1].bias) };
    });
    return {
      t,
      tvec,
      free() {
        t.free();
        tvec.free();
      },
    };
  }

  /** taps (B, Lt, n, txtdim) of the real tokens -> the text rows of the sequence (B, Lt, D). */
  context(taps: Tensor, trace?: TextFusionTrace): Tensor {
    const e = this.e;
    this.checkInput('taps', taps, [taps.shape[0]!, taps.shape[1]!, this.config.txtlayers, this.config.txtdim]);
    return e.chain(
      () => {
        const fused = this.txtfusion.forward(e, taps, trace);
        return trace ? e.keep(fused) : fused; // a trace holds the fused rows for the caller
      },
      (fused) => rmsNorm(e, fused, { eps: KREA2_EPS, weight: this.txtmlp[0].scale }),
      (n) => linear(e, n, this.txtmlp[1].weight, this.txtmlp[1].bias, { act: 'gelu_tanh' }),
      (h) => linear(e, h, this.txtmlp[3].weight, this.txtmlp[3].bias),
    );
  }

  /** RoPE tables for `textLength` text rows and a gridH x gridW patch grid (free it when the job ends). */
  geometry(textLength: number, gridH: number, gridW: number): Krea2Geometry {
    const e = this.e;
    const r = krea2RopeTable(krea2Positions(textLength, gridH, gridW), this.config.axes, this.config.theta);
    const cos = e.upload(r.cos, [r.rows, r.pairs], 'f32', 'krea2 rope cos');
    const sin = e.upload(r.sin, [r.rows, r.pairs], 'f32', 'krea2 rope sin');
    return {
      cos,
      sin,
      textLength,
      gridH,
      gridW,
      free() {
        cos.free();
        sin.free();
      },
    };
  }

  forward(input: Krea2Input): Krea2Output {
    const e = this.e;
    const cfg = this.config;
    const { img, context, geometry } = input;
    const B = img.shape[0]!;
    const N = geometry.gridH * geometry.gridW;
    const Lt = geometry.textLength;
    this.checkInput('img', img, [B, N, cfg.tokenDim]);
    this.checkInput('context', context, [B, Lt, cfg.features]);
    const time = this.timeVectors(input.sigma);
    const kept: Tensor[] | undefined = input.blockOutputs ? [] : undefined;
    try {
      // one chain: each step's input freed once its output exists, as the hand-placed frees did
      const sample = e.chain(
        () => linear(e, img, this.first.weight, this.first.bias),
        (tokens) => concat(e, [context, tokens], 1),
        ...this.blocks.map((block, n) => (x: Tensor) => {
          // the block's modulation freed with it; a streamed block uploaded for it (and the next one ahead)
          const next = this.stream.with(n, () => e.scope(() => block.forward(e, x, block.modulation(e, time.tvec), geometry)));
          if (kept) kept.push(e.keep(next)); // kept block outputs are the caller's
          return next;
        }),
        (x) =>
          e.scope(() => {
            const lastMod = add(e, time.t, this.last.modulation.lin); // (1, 2, D): scale, shift
            return rmsNorm(e, x.slice(1, Lt, Lt + N), { eps: KREA2_EPS, weight: this.last.norm.scale, scale: lastMod.slice(1, 0, 1), shift: lastMod.slice(1, 1, 2) });
          }),
        (n) => linear(e, n, this.last.linear.weight, this.last.linear.bias),
      );
      return kept ? { sample, blocks: kept } : { sample };
    } finally {
      time.free();
    }
  }

  private checkInput(name: string, t: Tensor, shape: number[]): void {
    if (t.dtype !== this.dtype) throw new TypeError(`Krea2Transformer: ${name} ${t} must be ${this.dtype}`);
    if (t.rank !== shape.length || t.shape.some((n, i) => n !== shape[i])) throw new RangeError(`Krea2Transformer: ${name} ${t} must be ${fmtShape(shape)}`);
  }

  free(): void {
    const lins = [this.first, this.tmlp[0], this.tmlp[2], this.tproj[1], this.txtmlp[1], this.txtmlp[3], this.last.linear];
    for (const l of lins) {
      freeLinear(l.weight);
      l.bias.free();
    }
    this.txtmlp[0].scale.free();
    this.last.norm.scale.free();
    this.last.modulation.lin.free();
    for (const b of this.blocks) b.free();
    this.txtfusion.free();
  }
}


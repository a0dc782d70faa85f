// Krea 2's blocks (krea-ai/krea-2 mmdit.py), field names = the checkpoint's key paths:
//   RMSNorm       y = x / rms(x) * (1 + scale)   eps 1e-5, statistics in f32; `scale` is stored zero-centred, so the
//                 GPU copy holds 1 + scale (folded once at load)
//   Attention     wq (H hd), wk / wv (Hkv hd), gate (D), wo (D), bias-free; per-head RMSNorm qknorm.{qnorm,knorm}
//                 on q and k, RoPE on q and k (when the caller gives tables), softmax attention (scale 1/sqrt(hd),
//                 query head h reads KV head h / (H / Hkv)), heads flattened head-major, times sigmoid(gate(x)), wo
//   SwiGLU        down(silu(gate x) * up x)
//   SingleStreamBlock   mod.lin (6D) added to the shared tproj row: [prescale, preshift, pregate, postscale,
//                 postshift, postgate]; x += pregate attn((1 + prescale) prenorm(x) + preshift);
//                 x += postgate mlp((1 + postscale) postnorm(x) + postshift)
//   TextFusionBlock     the same without modulation: x += attn(prenorm x); x += mlp(postnorm x)
import type { Engine } from '../../engine/engine';
import { attention } from '../../engine/ops/attention';
import { add, contiguous, mul } from '../../engine/ops/elementwise';
import { linear } from '../common/lora-linear'; // the engine's linear plus attached LoRA terms
import { headRmsNorm, rmsNorm } from '../../engine/ops/norm';
import { rope } from '../../engine/ops/rope';
import { sigmoid } from '../../engine/ops/unary';
import type { Tensor } from '../../engine/tensor';
import { freeLinear, loadLinear, loadPlain, type LinearWeight, type WeightLoader } from '../common/weights';
import { KREA2_EPS } from './config';

/** An RMSNorm's `scale` (stored zero-centred) as the multiplier 1 + scale, in the compute dtype. */
export async function loadNormScale(w: WeightLoader, key: string, width: number): Promise<Tensor> {
  const stored = await loadPlain(w, key, [width]);
  const one = add(w.e, stored, 1);
  w.loaded.splice(w.loaded.indexOf(stored), 1, one);
  stored.free();
  return one;
}

/** RoPE tables f32 (L, hd / 2) for the rows a call processes. */
export interface RopeRows {
  cos: Tensor;
  sin: Tensor;
}

/** The modulation of one block for one step: six (B, 1, D) views [prescale, preshift, pregate, postscale, postshift, postgate]. */
export interface BlockModulation {
  prescale: Tensor;
  preshift: Tensor;
  pregate: Tensor;
  postscale: Tensor;
  postshift: Tensor;
  postgate: Tensor;
}

/** Splits a (B, 1, 6D) modulation into its six chunks (views). */
export function splitModulation(mod: Tensor): BlockModulation {
  const D = mod.shape[2]! / 6;
  const part = (i: number) => mod.slice(2, i * D, (i + 1) * D);
  return { prescale: part(0), preshift: part(1), pregate: part(2), postscale: part(3), postshift: part(4), postgate: part(5) };
}

export class Krea2Attention {
  constructor(
    readonly wq: LinearWeight,
    readonly wk: LinearWeight,
    readonly wv: LinearWeight,
    readonly gate: LinearWeight,
    readonly wo: LinearWeight,
    readonly qknorm: { qnorm: Tensor; knorm: Tensor },
    readonly heads: number,
    readonly kvheads: number,
    readonly headDim: number,
  ) {}

  static async load(w: WeightLoader, p: string, dim: number, heads: number, kvheads: number): Promise<Krea2Attention> {
    const hd = dim / heads;
    return new Krea2Attention(
      await loadLinear(w, `${p}wq.weight`, [heads * hd, dim]),
      await loadLinear(w, `${p}wk.weight`, [kvheads * hd, dim]),
      await loadLinear(w, `${p}wv.weight`, [kvheads * hd, dim]),
      await loadLinear(w, `${p}gate.weight`, [dim, dim]),
      await loadLinear(w, `${p}wo.weight`, [dim, heads * hd]),
      { qnorm: await loadNormScale(w, `${p}qknorm.qnorm.scale`, hd), knorm: await loadNormScale(w, `${p}qknorm.knorm.scale`, hd) },
      heads,
      kvheads,
      hd,
    );
  }

  /**
   * h (B, L, D) the normed (modulated) input -> residual + outGate * wo(attention * sigmoid(gate h)), (B, L, D).
   * Without rope tables no rotation is applied (the text fusion).
   */
  forward(e: Engine, h: Tensor, residual: Tensor, o: { rope?: RopeRows; outGate?: Tensor } = {}): Tensor {
    const [B, L] = h.shape as [number, number, number];
    const hd = this.headDim;
    // Scopes free what each step made once the next exists (tensor scopes, engine/scope.ts): the order, and the
    // peak, of the hand-placed frees they replace.
    const project = (wt: LinearWeight, heads: number, norm: Tensor | null): Tensor => {
      const y = () => linear(e, h, wt).reshape([B, L, heads, hd]);
      if (!norm) return y();
      const n = (t: Tensor) => headRmsNorm(e, t, norm, KREA2_EPS);
      const r = o.rope;
      if (!r) return e.chain(y, n);
      return e.chain(y, n, (t) => rope(e, t, r.cos, r.sin, { style: 'interleaved' })); // pairs (2j, 2j + 1)
    };
    const heads = (t: Tensor) => t.permute([0, 2, 1, 3]);
    return e.scope(() => {
      const gated = e.scope(() => {
        const merged = e.chain(
          () => attention(e, heads(project(this.wq, this.heads, this.qknorm.qnorm)), heads(project(this.wk, this.kvheads, this.qknorm.knorm)), heads(project(this.wv, this.kvheads, null))), // (B, H, L, hd)
          (att) => contiguous(e, heads(att)).reshape([B, L, this.heads * hd]),
        );
        const sg = e.chain(() => linear(e, h, this.gate), (g) => sigmoid(e, g));
        return mul(e, merged, sg);
      });
      return linear(e, gated, this.wo, null, { gate: o.outGate, residual });
    });
  }

  free(): void {
    for (const w of [this.wq, this.wk, this.wv, this.gate, this.wo]) freeLinear(w);
    this.qknorm.qnorm.free();
    this.qknorm.knorm.free();
  }
}

export class Krea2SwiGLU {
  constructor(
    readonly gate: LinearWeight,
    readonly up: LinearWeight,
    readonly down: LinearWeight,
  ) {}

  static async load(w: WeightLoader, p: string, dim: number, hidden: number): Promise<Krea2SwiGLU> {
    return new Krea2SwiGLU(
      await loadLinear(w, `${p}gate.weight`, [hidden, dim]),
      await loadLinear(w, `${p}up.weight`, [hidden, dim]),
      await loadLinear(w, `${p}down.weight`, [dim, hidden]),
    );
  }

  /**
   * residual + outGate * down(silu(gate h) * up h); SiLU, product, gate and residual ride in GEMM epilogues. The
   * hidden activation (rows x 16384 at the real width) is made in row chunks that each fit one binding (a 4096 x 4096
   * image is 65k rows: 2.1 GB of f16 in one piece); batch 1 only then, whose row chunks are contiguous.
   */
  forward(e: Engine, h: Tensor, residual: Tensor, outGate?: Tensor, maxRows = this.rowsPerChunk(e, h)): Tensor {
    const [B, L, D] = h.shape as [number, number, number];
    if (L <= maxRows) return this.chunk(e, h, residual, outGate);
    if (B !== 1) throw new RangeError(`Krea2SwiGLU: ${L} rows in chunks of ${maxRows} need batch 1 (got ${B})`);
    return e.scope(() => {
      const out = e.empty([B, L, D], h.dtype, 'krea2 mlp out'); // freed by the scope if a chunk throws
      for (let r0 = 0; r0 < L; r0 += maxRows) {
        const r1 = Math.min(L, r0 + maxRows);
        this.chunk(e, h.slice(1, r0, r1), residual.slice(1, r0, r1), outGate, out.slice(1, r0, r1));
      }
      return out;
    });
  }

  /** Rows whose hidden activation fits one binding. */
  private rowsPerChunk(e: Engine, h: Tensor): number {
    const hidden = ('q' in this.gate ? this.gate.q : this.gate).shape[0]!;
    return Math.max(1, Math.floor(e.pool.maxBindingBytes / (hidden * h.bytesPerElement * h.shape[0]!)));
  }

  private chunk(e: Engine, h: Tensor, residual: Tensor, outGate: Tensor | undefined, out?: Tensor): Tensor {
    return e.chain(
      () => linear(e, h, this.gate, null, { act: 'silu' }),
      (g) => linear(e, h, this.up, null, { gate: g }),
      (m) => linear(e, m, this.down, null, { gate: outGate, residual, out }),
    );
  }

  free(): void {
    for (const w of [this.gate, this.up, this.down]) freeLinear(w);
  }
}

export class Krea2SingleStreamBlock {
  constructor(
    /** mod.lin (6D): the block's own bias on the shared tproj row. */
    readonly mod: { lin: Tensor },
    readonly prenorm: { scale: Tensor },
    readonly postnorm: { scale: Tensor },
    readonly attn: Krea2Attention,
    readonly mlp: Krea2SwiGLU,
  ) {}

  /** `p`: the block's key prefix, e.g. "blocks.7.". */
  static async load(w: WeightLoader, p: string, dim: number, heads: number, kvheads: number, mlpDim: number): Promise<Krea2SingleStreamBlock> {
    return new Krea2SingleStreamBlock(
      { lin: await loadPlain(w, `${p}mod.lin`, [6 * dim]) },
      { scale: await loadNormScale(w, `${p}prenorm.scale`, dim) },
      { scale: await loadNormScale(w, `${p}postnorm.scale`, dim) },
      await Krea2Attention.load(w, `${p}attn.`, dim, heads, kvheads),
      await Krea2SwiGLU.load(w, `${p}mlp.`, dim, mlpDim),
    );
  }

  /** tvec (B, 1, 6D), the shared tproj output -> this block's modulation (B, 1, 6D), a new tensor. */
  modulation(e: Engine, tvec: Tensor): Tensor {
    return add(e, tvec, this.mod.lin);
  }

  /** x (B, L, D) -> a new (B, L, D); x is left to the caller. `mod`: this block's modulation (modulation()). */
  forward(e: Engine, x: Tensor, mod: Tensor, ropeRows: RopeRows): Tensor {
    const m = splitModulation(mod);
    return e.scope(() => {
      const x1 = e.scope(() => {
        const h1 = rmsNorm(e, x, { eps: KREA2_EPS, weight: this.prenorm.scale, scale: m.prescale, shift: m.preshift });
        return this.attn.forward(e, h1, x, { rope: ropeRows, outGate: m.pregate });
      });
      const h2 = rmsNorm(e, x1, { eps: KREA2_EPS, weight: this.postnorm.scale, scale: m.postscale, shift: m.postshift });
      return this.mlp.forward(e, h2, x1, m.postgate);
    });
  }

  free(): void {
    this.mod.lin.free();
    this.prenorm.scale.free();
    this.postnorm.scale.free();
    this.attn.free();
    this.mlp.free();
  }
}

export class Krea2TextFusionBlock {
  constructor(
    readonly prenorm: { scale: Tensor },
    readonly postnorm: { scale: Tensor },
    readonly attn: Krea2Attention,
    readonly mlp: Krea2SwiGLU,
  ) {}

  static async load(w: WeightLoader, p: string, dim: number, heads: number, kvheads: number, mlpDim: number): Promise<Krea2TextFusionBlock> {
    return new Krea2TextFusionBlock(
      { scale: await loadNormScale(w, `${p}prenorm.scale`, dim) },
      { scale: await loadNormScale(w, `${p}postnorm.scale`, dim) },
      await Krea2Attention.load(w, `${p}attn.`, dim, heads, kvheads),
      await Krea2SwiGLU.load(w, `${p}mlp.`, dim, mlpDim),
    );
  }

  /** x (B, L, d): full attention over L (no mask, no RoPE) -> a new (B, L, d). */
  forward(e: Engine, x: Tensor): Tensor {
    return e.scope(() => {
      const x1 = e.scope(() => this.attn.forward(e, rmsNorm(e, x, { eps: KREA2_EPS, weight: this.prenorm.scale }), x));
      return this.mlp.forward(e, rmsNorm(e, x1, { eps: KREA2_EPS, weight: this.postnorm.scale }), x1);
    });
  }

  free(): void {
    this.prenorm.scale.free();
    this.postnorm.scale.free();
    this.attn.free();
    this.mlp.free();
  }
}

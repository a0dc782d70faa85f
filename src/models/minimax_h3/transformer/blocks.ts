// The MiniMax H3 blocks (diffusers transformer_minimax_h3.py). Field names are the checkpoint's key paths:
//   attn.{to_q,to_k,to_v,to_out.0}.weight (no biases), attn.norm_q/norm_k.weight (per-head RMSNorm, head_dim)
//   ff.net.0.proj.weight (H -> 2F: first half the value, second half the SiLU gate), ff.net.2.weight (F -> H)
//   norm1/norm2.weight (RMSNorm with weight), adaln_proj.linear.{weight,bias} (time_embed_dim -> 18 H)
// Shapes: the packed sequence is x [1, L, H]; attention runs numHeads x headDim (> H in the released model).
import { DTYPE_BYTES, encode, type DType } from '../../../engine/dtype';
import type { Engine } from '../../../engine/engine';
import { quantizeInt8FromCheckpoint } from '../../../engine/quantize-parallel';
import { glu } from '../../../engine/ops/activation';
import { attention } from '../../../engine/ops/attention';
import { contiguous } from '../../../engine/ops/elementwise';
import type { LinearOptions } from '../../../engine/ops/linear';
import { headRmsNorm, rmsNorm } from '../../../engine/ops/norm';
import { rope } from '../../../engine/ops/rope';
import type { Tensor } from '../../../engine/tensor';
import { hostBytes } from '../../common/host-weights';
import { linear } from '../../common/lora-linear'; // the engine's linear plus a job's LoRA terms (issue 46)
import { freeLinear, keyOf, loadLinear, loadPlain, type ComputeDType, type LinearWeight, type WeightLoader } from '../../common/weights';
import type { H3Config } from './config';
import type { RowModulation } from './modulation';

/** nn.Linear: weight (N, K) as stored, optional bias (N). */
export interface Linear {
  weight: LinearWeight;
  bias: Tensor | null;
}

export async function loadLinearModule(w: WeightLoader, p: string, n: number, k: number, bias: boolean): Promise<Linear> {
  return { weight: await loadLinear(w, `${p}weight`, [n, k]), bias: bias ? await loadPlain(w, `${p}bias`, [n]) : null };
}

export function applyLinear(e: Engine, m: Linear, x: Tensor, epi: LinearOptions = {}): Tensor {
  return linear(e, x, m.weight, m.bias, epi);
}

export function freeLinearModule(m: Linear): void {
  freeLinear(m.weight);
  m.bias?.free();
}

/**
 * A linear whose weight (N, K) stays in host memory as the exact bytes its GPU tensors would hold (what
 * loadLinearModule uploads: the compute dtype, or int8 q + per-channel scales in the compute dtype); the bias
 * (N, small) is on the GPU. adaln.ts streams such weights through one reused GPU buffer (the blocks' adaln_proj,
 * 13B parameters of the released model used only to build the AdaLN tables).
 */
export interface HostLinear {
  /** weight null: loaded on a shape-only engine (a plan), which holds no bytes; int8 scales are then null too. */
  host: { N: number; K: number; weightDtype: DType; weight: Uint8Array | null; scales: Uint8Array | null; scaleDtype: ComputeDType };
  bias: Tensor | null;
}

/** The adaln_proj of a block: resident on the GPU, or kept on the host. */
export type AdaLNProjection = Linear | HostLinear;

export function isHostLinear(m: AdaLNProjection): m is HostLinear {
  return 'host' in m;
}

/** loadLinearModule's bytes kept on the host: the same quantisation (int8) or chunked conversion (load.ts) as upload. */
export async function loadHostLinearModule(w: WeightLoader, p: string, n: number, k: number, bias: boolean): Promise<HostLinear> {
  const key = keyOf(w, `${p}weight`);
  let host: HostLinear['host'];
  if (w.e.shapeOnly) {
    // a plan: the shape checked, no bytes held (13 GB int8 / 26 GB 16-bit of host memory at the released size)
    w.ckpt.entry(key, [n, k]);
    host = { N: n, K: k, weightDtype: w.int8 ? 'i8' : w.dtype, weight: null, scales: null, scaleDtype: w.dtype };
  } else if (w.int8) {
    w.ckpt.entry(key, [n, k]); // shape check with the checkpoint's message
    const q = await quantizeInt8FromCheckpoint(w.ckpt, key, n, k);
    host = { N: n, K: k, weightDtype: 'i8', weight: new Uint8Array(q.q.buffer, q.q.byteOffset, q.q.byteLength), scales: encode(q.scales, w.dtype), scaleDtype: w.dtype };
  } else {
    host = { N: n, K: k, weightDtype: w.dtype, weight: await hostBytes(w.ckpt, key, [n, k], w.dtype), scales: null, scaleDtype: w.dtype };
  }
  return { host, bias: bias ? await loadPlain(w, `${p}bias`, [n]) : null };
}

/** RoPE tables of the packed sequence: f32 [L, 3F] (src/models/minimax_h3/transformer/rope.ts). */
export interface RotaryTables {
  cos: Tensor;
  sin: Tensor;
}

export class H3Attention {
  constructor(
    readonly to_q: LinearWeight,
    readonly to_k: LinearWeight,
    readonly to_v: LinearWeight,
    readonly to_out: readonly [LinearWeight],
    readonly norm_q: Tensor,
    readonly norm_k: Tensor,
  ) {}

  static async load(w: WeightLoader, cfg: H3Config, p: string): Promise<H3Attention> {
    const inner = cfg.numHeads * cfg.headDim;
    const h = cfg.hiddenSize;
    return new H3Attention(
      await loadLinear(w, `${p}to_q.weight`, [inner, h]),
      await loadLinear(w, `${p}to_k.weight`, [inner, h]),
      await loadLinear(w, `${p}to_v.weight`, [inner, h]),
      [await loadLinear(w, `${p}to_out.0.weight`, [h, inner])],
      await loadPlain(w, `${p}norm_q.weight`, [cfg.headDim]),
      await loadPlain(w, `${p}norm_k.weight`, [cfg.headDim]),
    );
  }

  /**
   * Full bidirectional self-attention over x [1, L, H] (normed input): QK RMSNorm per head, RoPE on the first
   * 6F head dims when `rot` is given, then to_out with the caller's epilogue (gate, residual).
   */
  forward(e: Engine, cfg: H3Config, x: Tensor, rot: RotaryTables | null, epi: LinearOptions): Tensor {
    const [B, L] = x.shape as [number, number, number];
    const { numHeads: nh, headDim: d, qkNormEps: eps } = cfg;
    // chains free each step's input once its output exists (tensor scopes, engine/scope.ts): the order, and the peak,
    // of the hand-placed frees they replace
    const project = (w: LinearWeight, norm: Tensor | null): Tensor => {
      const y = () => linear(e, x, w).reshape([B, L, nh, d]);
      if (!norm) return y();
      const n = (t: Tensor) => headRmsNorm(e, t, norm, eps);
      if (!rot) return e.chain(y, n);
      return e.chain(y, n, (t) => rope(e, t, rot.cos, rot.sin));
    };
    const heads = (t: Tensor) => t.permute([0, 2, 1, 3]);
    return e.chain(
      // q, k, v freed once the attention exists
      () => attention(e, heads(project(this.to_q, this.norm_q)), heads(project(this.to_k, this.norm_k)), heads(project(this.to_v, null))), // (B, nh, L, d)
      (att) => contiguous(e, heads(att)), // (B, L, nh, d)
      (merged) => linear(e, merged.reshape([B, L, nh * d]), this.to_out[0], null, epi),
    );
  }

  free(): void {
    for (const w of [this.to_q, this.to_k, this.to_v, this.to_out[0]]) freeLinear(w);
    this.norm_q.free();
    this.norm_k.free();
  }
}

/** Bytes of one piece of the FFN's [rows, 2F] intermediate (H3FeedForward.forward). */
export const FFN_PIECE_BYTES = 512 * 2 ** 20;

/** diffusers FeedForward(activation_fn="swiglu"): net.0 = SwiGLU (proj H -> 2F), net.1 dropout, net.2 F -> H. */
export class H3FeedForward {
  constructor(readonly net: { 0: { proj: LinearWeight }; 2: LinearWeight }) {}

  static async load(w: WeightLoader, cfg: H3Config, p: string): Promise<H3FeedForward> {
    const { hiddenSize: h, ffnDim: f } = cfg;
    return new H3FeedForward({ 0: { proj: await loadLinear(w, `${p}net.0.proj.weight`, [2 * f, h]) }, 2: await loadLinear(w, `${p}net.2.weight`, [h, f]) });
  }

  /**
   * net.2(value * silu(gate)) with [value | gate] = net.0.proj(x); the epilogue (gate, residual) on net.2.
   * x [..., L, H] contiguous. Rows go through in pieces of `pieceRows` (default: the [rows, 2F] intermediate within
   * FFN_PIECE_BYTES and one binding), each written into its rows of the output: at 768p 10 s (73k rows, 2F = 28672)
   * the whole intermediate would be 4.2 GB in f16, a piece is at most 512 MiB. Rows are independent, so the result
   * is the same as in one piece. Epilogue tensors with one row per x row are cut the same way; a single row broadcasts.
   */
  forward(e: Engine, x: Tensor, epi: LinearOptions, pieceRows?: number): Tensor {
    const H = x.shape[x.rank - 1]!;
    const rows = x.numel / H;
    const w0 = 'q' in this.net[0].proj ? this.net[0].proj.q : this.net[0].proj;
    const w2 = 'q' in this.net[2] ? this.net[2].q : this.net[2];
    const twoF = w0.shape[0]!;
    const budget = Math.min(FFN_PIECE_BYTES, e.gpu.maxBindingBytes);
    const piece = pieceRows ?? Math.max(1, Math.floor(budget / (twoF * DTYPE_BYTES[x.dtype])));
    if (rows <= piece) return this.piece(e, x, epi);
    const N = w2.shape[0]!;
    const flat = (t: Tensor, n: number) => t.reshape([rows, n]);
    const cut = (t: Tensor | undefined, r0: number, r1: number): Tensor | undefined => {
      if (!t || t.numel === N) return t?.reshape([1, N]); // one row for all: broadcasts to the piece
      if (t.numel === rows * N) return flat(t, N).slice(0, r0, r1);
      throw new RangeError(`H3FeedForward: epilogue ${t} is neither per row nor one row of ${N}`);
    };
    return e.scope(() => {
      const out = e.empty([...x.shape.slice(0, -1), N], x.dtype, 'h3 ffn out'); // freed by the scope if a piece throws
      for (let r0 = 0; r0 < rows; r0 += piece) {
        const r1 = Math.min(rows, r0 + piece);
        this.piece(e, flat(x, H).slice(0, r0, r1), { ...epi, gate: cut(epi.gate, r0, r1), residual: cut(epi.residual, r0, r1), out: flat(out, N).slice(0, r0, r1) });
      }
      return out;
    });
  }

  private piece(e: Engine, x: Tensor, epi: LinearOptions): Tensor {
    return e.chain(
      () => linear(e, x, this.net[0].proj), // [value | gate]
      (vg) => glu(e, 'silu', vg, undefined, { gateFirst: false }),
      (m) => linear(e, m, this.net[2], null, epi),
    );
  }

  free(): void {
    freeLinear(this.net[0].proj);
    freeLinear(this.net[2]);
  }
}

/** Token refiner block: plain pre-norm attention + FFN on the text rows, no AdaLN, no RoPE. */
export class H3RefinerBlock {
  constructor(
    readonly norm1: Tensor,
    readonly attn: H3Attention,
    readonly norm2: Tensor,
    readonly ff: H3FeedForward,
  ) {}

  static async load(w: WeightLoader, cfg: H3Config, p: string): Promise<H3RefinerBlock> {
    return new H3RefinerBlock(
      await loadPlain(w, `${p}norm1.weight`, [cfg.hiddenSize]),
      await H3Attention.load(w, cfg, `${p}attn.`),
      await loadPlain(w, `${p}norm2.weight`, [cfg.hiddenSize]),
      await H3FeedForward.load(w, cfg, `${p}ff.`),
    );
  }

  forward(e: Engine, cfg: H3Config, x: Tensor): Tensor {
    return e.scope(() => {
      // h1 freed once x1 exists; h2 and x1 once x2 does
      const x1 = e.scope(() => this.attn.forward(e, cfg, rmsNorm(e, x, { weight: this.norm1, eps: cfg.normEps }), null, { residual: x }));
      return this.ff.forward(e, rmsNorm(e, x1, { weight: this.norm2, eps: cfg.normEps }), { residual: x1 });
    });
  }

  free(): void {
    this.norm1.free();
    this.attn.free();
    this.norm2.free();
    this.ff.free();
  }
}

/** What every block of one forward shares. */
export interface BlockContext {
  rot: RotaryTables;
  /** Row -> AdaLN table row (timestep_index * 3 + tag). */
  mod: RowModulation;
  /** Tests: intermediates as upstream's hooks see them (norm1 unmodulated, attn and ff ungated, after_attn); freed after the call. */
  capture?: (name: string, t: Tensor) => void;
}

/** AdaLN table columns, in units of H: diffusers' shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp. */
export const ADALN = { shiftMsa: 0, scaleMsa: 1, gateMsa: 2, shiftMlp: 3, scaleMlp: 4, gateMlp: 5 } as const;

/** A = the adaln_proj's kind: Linear (resident, the default of load) or AdaLNProjection (adalnOnHost possible). */
export class H3TransformerBlock<A extends AdaLNProjection = Linear> {
  constructor(
    readonly norm1: Tensor,
    readonly attn: H3Attention,
    readonly norm2: Tensor,
    readonly ff: H3FeedForward,
    readonly adaln_proj: { linear: A },
  ) {}

  static async load(w: WeightLoader, cfg: H3Config, p: string): Promise<H3TransformerBlock<Linear>>;
  /** adalnOnHost: adaln_proj.linear's weight stays in host memory (HostLinear), streamed when tables are built. */
  static async load(w: WeightLoader, cfg: H3Config, p: string, opts: { adalnOnHost: boolean }): Promise<H3TransformerBlock<AdaLNProjection>>;
  static async load(w: WeightLoader, cfg: H3Config, p: string, opts: { adalnOnHost?: boolean } = {}): Promise<H3TransformerBlock<AdaLNProjection>> {
    const h = cfg.hiddenSize;
    const loadProj = opts.adalnOnHost ? loadHostLinearModule : loadLinearModule;
    return new H3TransformerBlock<AdaLNProjection>(
      await loadPlain(w, `${p}norm1.weight`, [h]),
      await H3Attention.load(w, cfg, `${p}attn.`),
      await loadPlain(w, `${p}norm2.weight`, [h]),
      await H3FeedForward.load(w, cfg, `${p}ff.`),
      { linear: await loadProj(w, `${p}adaln_proj.linear.`, 18 * h, cfg.timeEmbedDim, true) },
    );
  }

  /**
   * x [1, L, H] -> new [1, L, H]; `table` is this block's AdaLN table (T * 3, 6H) for the step (adaln.ts):
   *   x += gate_msa * attn(norm1(x) * (1 + scale_msa) + shift_msa)
   *   x += gate_mlp * ff(norm2(x) * (1 + scale_mlp) + shift_mlp)
   */
  forward(e: Engine, cfg: H3Config, x: Tensor, table: Tensor, ctx: BlockContext): Tensor {
    const H = cfg.hiddenSize;
    const { mod } = ctx;
    // the test's callback runs outside the scopes: the copies it makes are its own
    const capture = ctx.capture && ((name: string, t: Tensor) => e.unscoped(() => ctx.capture!(name, t)));
    return e.scope(() => {
      // the norm module's output, unmodulated, and the ungated branches: made for the capture, freed after it
      if (capture) e.scope(() => capture('norm1', rmsNorm(e, x, { weight: this.norm1, eps: cfg.normEps })));
      // h1 and the gate freed once x1 exists; h2, the gate and x1 once x2 does
      const x1 = e.scope(() => {
        const h1 = mod.norm(e, x, table, ADALN.shiftMsa, ADALN.scaleMsa, { weight: this.norm1, eps: cfg.normEps });
        const g = mod.gate(e, table, ADALN.gateMsa, H);
        if (capture) e.scope(() => capture('attn', this.attn.forward(e, cfg, h1, ctx.rot, {})));
        return this.attn.forward(e, cfg, h1, ctx.rot, { gate: g, residual: x });
      });
      capture?.('after_attn', x1);
      const h2 = mod.norm(e, x1, table, ADALN.shiftMlp, ADALN.scaleMlp, { weight: this.norm2, eps: cfg.normEps });
      const g = mod.gate(e, table, ADALN.gateMlp, H);
      if (capture) e.scope(() => capture('ff', this.ff.forward(e, h2, {})));
      return this.ff.forward(e, h2, { gate: g, residual: x1 });
    });
  }

  free(): void {
    this.norm1.free();
    this.attn.free();
    this.norm2.free();
    this.ff.free();
    const proj: AdaLNProjection = this.adaln_proj.linear;
    if (isHostLinear(proj)) proj.bias?.free();
    else freeLinearModule(proj);
  }
}

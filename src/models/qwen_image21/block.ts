// One single-stream block of Qwen-Image-2.1 (diffusers QwenImage21TransformerBlock). No per-block modulation
// weights, no biases, no norm affine:
//   x += tanh(gate1) * to_out.0(attention(LN(x) * (1 + scale1)))     QK RMSNorm (norm_q/norm_k) + 3-axis RoPE
//   x += tanh(gate2) * img_mlp.out(silu(img_mlp.gate_layer(h)) * img_mlp.proj(h)),  h = LN(x) * (1 + scale2)
// Field names are the checkpoint's key paths under transformer_blocks.N.
//
// The block runs on one part of the joint sequence at a time, because the two parts differ in everything but the
// weights: the prefix (text + references) reads the t = 0 modulation row and attends block-causally to itself;
// the target image reads the sampled-t row and attends to everything (prefix + itself). Each part writes its
// keys and values into its slots of the layer's KV store (B, H, Lp + Lt, Dh), so the target pass finds the prefix's
// there, whether written in this forward or cached from an earlier step.
import type { Engine } from '../../engine/engine';
import { attention } from '../../engine/ops/attention';
import { contiguous } from '../../engine/ops/elementwise';
import { copyInto } from '../../engine/ops/layout';
import { linear } from '../common/lora-linear'; // the engine's linear plus attached LoRA terms
import { headRmsNorm, layerNorm } from '../../engine/ops/norm';
import { rope } from '../../engine/ops/rope';
import type { Tensor } from '../../engine/tensor';
import { freeLinear, loadLinear, loadPlain, type LinearWeight, type WeightLoader } from '../common/weights';
import type { QwenImage21Config } from './config';
import type { ModRow } from './modulation';

/** Keys and values of one layer: (B, H, capacity, Dh) each. */
export interface LayerKv {
  k: Tensor;
  v: Tensor;
}

/** Which part of the joint sequence a block call processes. */
export interface BlockPart {
  /** Modulation row of this part (t = 0 for the prefix under causal_condition). */
  mod: ModRow;
  /** RoPE tables f32 (L, headDim / 2) of this part's rows. */
  cos: Tensor;
  sin: Tensor;
  /** First slot of this part in the KV store (0 for the prefix, prefix length for the target). */
  start: number;
  /** Prefix: block ids f32 (L) for the block-causal mask. Target: omitted (it sees every key before and in it). */
  blockIds?: Tensor;
}

export class QwenImage21Attention {
  constructor(
    readonly to_q: LinearWeight,
    readonly to_k: LinearWeight,
    readonly to_v: LinearWeight,
    /** to_out.0 (to_out.1 is a dropout). */
    readonly to_out: readonly [LinearWeight],
    readonly norm_q: Tensor,
    readonly norm_k: Tensor,
  ) {}

  static async load(w: WeightLoader, cfg: QwenImage21Config, p: string): Promise<QwenImage21Attention> {
    const { dim, headDim } = cfg;
    return new QwenImage21Attention(
      await loadLinear(w, `${p}to_q.weight`, [dim, dim]),
      await loadLinear(w, `${p}to_k.weight`, [dim, dim]),
      await loadLinear(w, `${p}to_v.weight`, [dim, dim]),
      [await loadLinear(w, `${p}to_out.0.weight`, [dim, dim])],
      await loadPlain(w, `${p}norm_q.weight`, [headDim]),
      await loadPlain(w, `${p}norm_k.weight`, [headDim]),
    );
  }

  /** h (B, L, D) modulated input -> residual + gate * to_out(attention), (B, L, D). */
  forward(e: Engine, cfg: QwenImage21Config, h: Tensor, residual: Tensor, part: BlockPart, kv: LayerKv): Tensor {
    const [B, L] = h.shape as [number, number, number];
    const { numHeads: H, headDim: Dh, eps } = cfg;
    // scopes free each step's input once its output exists (engine/scope.ts): the order of the hand-placed frees
    const project = (wt: LinearWeight, norm: Tensor | null): Tensor => {
      const y = () => linear(e, h, wt).reshape([B, L, H, Dh]);
      if (!norm) return y();
      return e.chain(y, (t) => headRmsNorm(e, t, norm, eps), (n) => rope(e, n, part.cos, part.sin, { style: 'interleaved' })); // complex pairs (2j, 2j+1)
    };
    const heads = (t: Tensor) => t.permute([0, 2, 1, 3]);
    const end = part.start + L;
    return e.chain(
      () => {
        const q = project(this.to_q, this.norm_q); // freed once attention has read it
        e.scope(() => {
          // k and v freed once copied into the layer's KV
          copyInto(e, heads(project(this.to_k, this.norm_k)), kv.k.slice(2, part.start, end));
          copyInto(e, heads(project(this.to_v, null)), kv.v.slice(2, part.start, end));
        });
        const keys = kv.k.slice(2, 0, end);
        const values = kv.v.slice(2, 0, end);
        return part.blockIds
          ? attention(e, heads(q), keys, values, { mask: 'block_causal', blockIds: part.blockIds, queryOffset: part.start })
          : attention(e, heads(q), keys, values);
      },
      (att) => contiguous(e, heads(att)), // (B, L, H, Dh)
      (merged) => linear(e, merged.reshape([B, L, H * Dh]), this.to_out[0], null, { gate: part.mod.gate1, residual }),
    );
  }

  free(): void {
    for (const w of [this.to_q, this.to_k, this.to_v, this.to_out[0]]) freeLinear(w);
    this.norm_q.free();
    this.norm_k.free();
  }
}

export class QwenImage21SwiGLU {
  constructor(
    readonly proj: LinearWeight,
    readonly gate_layer: LinearWeight,
    readonly out: LinearWeight,
  ) {}

  static async load(w: WeightLoader, cfg: QwenImage21Config, p: string): Promise<QwenImage21SwiGLU> {
    const { dim } = cfg;
    const hidden = dim * cfg.mlpRatio;
    return new QwenImage21SwiGLU(
      await loadLinear(w, `${p}proj.weight`, [hidden, dim]),
      await loadLinear(w, `${p}gate_layer.weight`, [hidden, dim]),
      await loadLinear(w, `${p}out.weight`, [dim, hidden]),
    );
  }

  /** residual + gate * out(silu(gate_layer(h)) * proj(h)); SiLU, product, gate and residual ride in GEMM epilogues. */
  forward(e: Engine, h: Tensor, residual: Tensor, gate: Tensor): Tensor {
    return e.chain(
      () => linear(e, h, this.gate_layer, null, { act: 'silu' }),
      (g) => linear(e, h, this.proj, null, { gate: g }),
      (m) => linear(e, m, this.out, null, { gate, residual }),
    );
  }

  free(): void {
    for (const w of [this.proj, this.gate_layer, this.out]) freeLinear(w);
  }
}

export class QwenImage21Block {
  constructor(
    readonly attn: QwenImage21Attention,
    readonly img_mlp: QwenImage21SwiGLU,
  ) {}

  /** `p`: the block's key prefix, e.g. "transformer_blocks.7.". */
  static async load(w: WeightLoader, cfg: QwenImage21Config, p: string): Promise<QwenImage21Block> {
    return new QwenImage21Block(await QwenImage21Attention.load(w, cfg, `${p}attn.`), await QwenImage21SwiGLU.load(w, cfg, `${p}img_mlp.`));
  }

  /** x (B, L, D) of one part -> new (B, L, D); x is left to the caller. */
  forward(e: Engine, cfg: QwenImage21Config, x: Tensor, part: BlockPart, kv: LayerKv): Tensor {
    return e.scope(() => {
      const x1 = e.scope(() => {
        const h1 = layerNorm(e, x, { eps: cfg.eps, scale: part.mod.scale1 }); // img_norm1 (no affine) * (1 + scale1)
        return this.attn.forward(e, cfg, h1, x, part, kv);
      });
      const h2 = layerNorm(e, x1, { eps: cfg.eps, scale: part.mod.scale2 }); // img_norm2
      return this.img_mlp.forward(e, h2, x1, part.mod.gate2);
    });
  }

  free(): void {
    this.attn.free();
    this.img_mlp.free();
  }
}

// One Qwen3 decoder layer (transformers Qwen3DecoderLayer / Qwen3VLTextDecoderLayer): pre-norm attention with
// per-head QK RMSNorm, RoPE, grouped-query heads, then a SwiGLU MLP. Field names are the checkpoint's key paths
// under layers.N: self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm, mlp.{gate,up,down}_proj, input_layernorm,
// post_attention_layernorm.
import type { Engine } from '../../engine/engine';
import { attention, type AttentionOptions } from '../../engine/ops/attention';
import { contiguous } from '../../engine/ops/elementwise';
import { copyInto } from '../../engine/ops/layout';
import { linear } from '../../engine/ops/linear';
import { headRmsNorm, rmsNorm } from '../../engine/ops/norm';
import { rope } from '../../engine/ops/rope';
import type { Tensor } from '../../engine/tensor';
import type { Qwen3Config } from './config';
import { freeLinear, loadLinear, loadPlain, type LinearWeight, type WeightLoader } from '../common/weights';

/** What every layer of one forward call shares. */
export interface LayerContext {
  /** RoPE tables, f32 (L, headDim / 2). */
  cos: Tensor;
  sin: Tensor;
  /** Tokens already in the cache before this call (the new tokens' first cache slot). */
  start: number;
  /** Block ids f32 (>= start + L) when some keys are padding (block-causal mask); causal otherwise. */
  blockIds?: Tensor;
}

/** Per-layer KV storage: (B, Hkv, capacity, D) each; this call writes slots start..start+L-1. */
export interface LayerCache {
  k: Tensor;
  v: Tensor;
}

export class Qwen3Attention {
  constructor(
    readonly q_proj: LinearWeight,
    readonly k_proj: LinearWeight,
    readonly v_proj: LinearWeight,
    readonly o_proj: LinearWeight,
    readonly q_norm: Tensor,
    readonly k_norm: Tensor,
    /** Biases when attention_bias is set (none in released Qwen3 checkpoints). */
    readonly bias: { q: Tensor; k: Tensor; v: Tensor; o: Tensor } | null,
  ) {}

  static async load(w: WeightLoader, cfg: Qwen3Config, p: string): Promise<Qwen3Attention> {
    const { hiddenSize: h, numHeads, numKvHeads, headDim: d } = cfg;
    const bias = cfg.attentionBias
      ? {
          q: await loadPlain(w, `${p}q_proj.bias`, [numHeads * d]),
          k: await loadPlain(w, `${p}k_proj.bias`, [numKvHeads * d]),
          v: await loadPlain(w, `${p}v_proj.bias`, [numKvHeads * d]),
          o: await loadPlain(w, `${p}o_proj.bias`, [h]),
        }
      : null;
    return new Qwen3Attention(
      await loadLinear(w, `${p}q_proj.weight`, [numHeads * d, h]),
      await loadLinear(w, `${p}k_proj.weight`, [numKvHeads * d, h]),
      await loadLinear(w, `${p}v_proj.weight`, [numKvHeads * d, h]),
      await loadLinear(w, `${p}o_proj.weight`, [h, numHeads * d]),
      await loadPlain(w, `${p}q_norm.weight`, [d]),
      await loadPlain(w, `${p}k_norm.weight`, [d]),
      bias,
    );
  }

  /** h (B, L, hidden) normed input; returns residual + o_proj(attention) (B, L, hidden). */
  forward(e: Engine, cfg: Qwen3Config, h: Tensor, residual: Tensor, ctx: LayerContext, cache?: LayerCache): Tensor {
    const [B, L] = h.shape as [number, number, number];
    const { numHeads: hq, numKvHeads: hkv, headDim: d, rmsNormEps: eps } = cfg;
    // scopes free each step's input once its output exists (engine/scope.ts): the order of the hand-placed frees
    const project = (w: LinearWeight, b: Tensor | undefined, norm: Tensor | null, heads: number): Tensor => {
      const y = () => linear(e, h, w, b).reshape([B, L, heads, d]);
      if (!norm) return y();
      return e.chain(y, (t) => headRmsNorm(e, t, norm, eps), (n) => rope(e, n, ctx.cos, ctx.sin)); // (B, L, heads, D)
    };
    return e.chain(
      () => {
        // q, k, v freed once attention has read them
        const q = project(this.q_proj, this.bias?.q, this.q_norm, hq);
        const k = project(this.k_proj, this.bias?.k, this.k_norm, hkv);
        const v = project(this.v_proj, this.bias?.v, null, hkv);
        // (B, L, H, D) -> (B, H, L, D) views; with a cache the new keys go to slots start..start+L-1
        let keys = k.permute([0, 2, 1, 3]);
        let values = v.permute([0, 2, 1, 3]);
        const total = ctx.start + L;
        if (cache) {
          copyInto(e, keys, cache.k.slice(2, ctx.start, total));
          copyInto(e, values, cache.v.slice(2, ctx.start, total));
          keys = cache.k.slice(2, 0, total);
          values = cache.v.slice(2, 0, total);
        }
        const opts: AttentionOptions = ctx.blockIds
          ? { mask: 'block_causal', blockIds: ctx.blockIds, queryOffset: ctx.start }
          : { mask: 'causal', queryOffset: ctx.start };
        return attention(e, q.permute([0, 2, 1, 3]), keys, values, opts); // (B, Hq, L, D)
      },
      // (B, Hq, L, D) -> (B, L, Hq, D): a view when L = 1 (the chain then keeps att until o_proj has read it), one copy otherwise
      (att) => {
        const perm = att.permute([0, 2, 1, 3]);
        return perm.isContiguous ? perm : contiguous(e, perm);
      },
      (merged) => linear(e, merged.reshape([B, L, hq * d]), this.o_proj, this.bias?.o, { residual }),
    );
  }

  free(): void {
    for (const w of [this.q_proj, this.k_proj, this.v_proj, this.o_proj]) freeLinear(w);
    this.q_norm.free();
    this.k_norm.free();
    if (this.bias) for (const b of Object.values(this.bias)) b.free();
  }
}

export class Qwen3Mlp {
  constructor(
    readonly gate_proj: LinearWeight,
    readonly up_proj: LinearWeight,
    readonly down_proj: LinearWeight,
  ) {}

  static async load(w: WeightLoader, cfg: Qwen3Config, p: string): Promise<Qwen3Mlp> {
    const { hiddenSize: h, intermediateSize: f } = cfg;
    return new Qwen3Mlp(
      await loadLinear(w, `${p}gate_proj.weight`, [f, h]),
      await loadLinear(w, `${p}up_proj.weight`, [f, h]),
      await loadLinear(w, `${p}down_proj.weight`, [h, f]),
    );
  }

  /** residual + down(silu(gate(h)) * up(h)); the SiLU, the product and the residual ride in the GEMM epilogues. */
  forward(e: Engine, h: Tensor, residual: Tensor): Tensor {
    return e.chain(
      () => linear(e, h, this.gate_proj, null, { act: 'silu' }),
      (g) => linear(e, h, this.up_proj, null, { gate: g }),
      (m) => linear(e, m, this.down_proj, null, { residual }),
    );
  }

  free(): void {
    for (const w of [this.gate_proj, this.up_proj, this.down_proj]) freeLinear(w);
  }
}

export class Qwen3DecoderLayer {
  constructor(
    readonly self_attn: Qwen3Attention,
    readonly mlp: Qwen3Mlp,
    readonly input_layernorm: Tensor,
    readonly post_attention_layernorm: Tensor,
  ) {}

  /** `p`: the layer's key prefix, e.g. "model.layers.7.". */
  static async load(w: WeightLoader, cfg: Qwen3Config, p: string): Promise<Qwen3DecoderLayer> {
    return new Qwen3DecoderLayer(
      await Qwen3Attention.load(w, cfg, `${p}self_attn.`),
      await Qwen3Mlp.load(w, cfg, `${p}mlp.`),
      await loadPlain(w, `${p}input_layernorm.weight`, [cfg.hiddenSize]),
      await loadPlain(w, `${p}post_attention_layernorm.weight`, [cfg.hiddenSize]),
    );
  }

  /** x (B, L, hidden) -> new (B, L, hidden); x is left to the caller. */
  forward(e: Engine, cfg: Qwen3Config, x: Tensor, ctx: LayerContext, cache?: LayerCache): Tensor {
    const eps = cfg.rmsNormEps;
    return e.chain(
      () => rmsNorm(e, x, { weight: this.input_layernorm, eps }),
      (h) => this.self_attn.forward(e, cfg, h, x, ctx, cache), // x1; h freed once it exists
      (x1) => this.mlp.forward(e, rmsNorm(e, x1, { weight: this.post_attention_layernorm, eps }), x1), // the normed h2 and x1 freed once x2 exists
    );
  }

  free(): void {
    this.self_attn.free();
    this.mlp.free();
    this.input_layernorm.free();
    this.post_attention_layernorm.free();
  }
}

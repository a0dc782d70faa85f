// The codec's two transformers, on (1, L, hidden) activations, both causal with a sliding window and layer scales
// (each branch is multiplied by a learnt per-channel scale before its residual add, fused into the GEMM epilogue):
//   CodecDecoderTransformer  upstream Qwen3TTSTokenizerV2DecoderTransformerModel (keys "decoder.pre_transformer."):
//                            input_proj (latent -> hidden, bias), layers.N (RMSNorm, attention without QK norm,
//                            SwiGLU MLP), norm, output_proj (hidden -> latent, bias). Window 72 in the real config.
//   MimiTransformer          transformers' MimiTransformerModel (keys "encoder.encoder_transformer."): layers.N with
//                            LayerNorm (bias), the same attention, GELU MLP fc1/fc2; no final norm. Window 250.
// Both: RoPE 1-D rotate-half over the whole head dim, positions 0..L-1, softmax scale 1/sqrt(head_dim).
import type { Engine } from '../../../engine/engine';
import { attention } from '../../../engine/ops/attention';
import { contiguous } from '../../../engine/ops/elementwise';
import { linear } from '../../../engine/ops/linear';
import { layerNorm, rmsNorm } from '../../../engine/ops/norm';
import { rope } from '../../../engine/ops/rope';
import { rope1d, uploadRope } from '../../../engine/rope-tables';
import type { Tensor } from '../../../engine/tensor';
import { loadPlain, type WeightLoader } from '../../common/weights';

export interface CodecAttentionShape {
  hiddenSize: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  slidingWindow: number;
  ropeTheta: number;
}

/** RoPE tables for positions 0..L-1, f32 (L, headDim / 2); the caller frees them. */
export function ropeTables(e: Engine, length: number, headDim: number, theta: number): { cos: Tensor; sin: Tensor } {
  return uploadRope(e, rope1d(Array.from({ length }, (_, i) => i), headDim, theta));
}

/** self_attn.{q,k,v,o}_proj (no biases) + the layer's self_attn_layer_scale.scale, applied in o_proj's epilogue. */
export class CodecSelfAttention {
  constructor(
    readonly q_proj: Tensor,
    readonly k_proj: Tensor,
    readonly v_proj: Tensor,
    readonly o_proj: Tensor,
  ) {}

  static async load(w: WeightLoader, s: CodecAttentionShape, p: string): Promise<CodecSelfAttention> {
    const { hiddenSize: h, numHeads: hq, numKvHeads: hkv, headDim: d } = s;
    return new CodecSelfAttention(
      await loadPlain(w, `${p}q_proj.weight`, [hq * d, h]),
      await loadPlain(w, `${p}k_proj.weight`, [hkv * d, h]),
      await loadPlain(w, `${p}v_proj.weight`, [hkv * d, h]),
      await loadPlain(w, `${p}o_proj.weight`, [h, hq * d]),
    );
  }

  /** h (1, L, hidden) normed input -> residual + scale * o_proj(attention(h)). */
  forward(e: Engine, s: CodecAttentionShape, h: Tensor, residual: Tensor, scale: Tensor, rot: { cos: Tensor; sin: Tensor }): Tensor {
    const [B, L] = h.shape as [number, number];
    const { numHeads: hq, numKvHeads: hkv, headDim: d } = s;
    // scopes free each step's input once its output exists (engine/scope.ts): the order of the hand-placed frees
    const project = (wt: Tensor, heads: number, rotate: boolean): Tensor => {
      const y = () => linear(e, h, wt).reshape([B, L, heads, d]);
      return rotate ? e.chain(y, (t) => rope(e, t, rot.cos, rot.sin)) : y();
    };
    return e.chain(
      () => {
        const q = project(this.q_proj, hq, true); // q, k, v freed once attention has read them
        const k = project(this.k_proj, hkv, true);
        const v = project(this.v_proj, hkv, false);
        return attention(e, q.permute([0, 2, 1, 3]), k.permute([0, 2, 1, 3]), v.permute([0, 2, 1, 3]), { mask: 'causal', window: s.slidingWindow }); // (B, Hq, L, D)
      },
      (att) => {
        const perm = att.permute([0, 2, 1, 3]);
        return perm.isContiguous ? perm : contiguous(e, perm); // a view of att when L = 1 (att then lives until o_proj has read it)
      },
      (merged) => linear(e, merged.reshape([B, L, hq * d]), this.o_proj, null, { gate: scale, residual }),
    );
  }

  free(): void {
    for (const t of [this.q_proj, this.k_proj, this.v_proj, this.o_proj]) t.free();
  }
}

export interface CodecDecoderTransformerConfig extends CodecAttentionShape {
  latentDim: number;
  intermediateSize: number;
  numLayers: number;
  rmsNormEps: number;
}

/** One layer of the decoder's transformer (Qwen3TTSTokenizerV2DecoderTransformerLayer). */
export class CodecDecoderLayer {
  constructor(
    readonly self_attn: CodecSelfAttention,
    readonly mlp: { gate_proj: Tensor; up_proj: Tensor; down_proj: Tensor },
    readonly input_layernorm: Tensor,
    readonly post_attention_layernorm: Tensor,
    /** self_attn_layer_scale.scale, mlp_layer_scale.scale: [hidden]. */
    readonly self_attn_layer_scale: Tensor,
    readonly mlp_layer_scale: Tensor,
  ) {}

  static async load(w: WeightLoader, c: CodecDecoderTransformerConfig, p: string): Promise<CodecDecoderLayer> {
    const { hiddenSize: h, intermediateSize: f } = c;
    return new CodecDecoderLayer(
      await CodecSelfAttention.load(w, c, `${p}self_attn.`),
      {
        gate_proj: await loadPlain(w, `${p}mlp.gate_proj.weight`, [f, h]),
        up_proj: await loadPlain(w, `${p}mlp.up_proj.weight`, [f, h]),
        down_proj: await loadPlain(w, `${p}mlp.down_proj.weight`, [h, f]),
      },
      await loadPlain(w, `${p}input_layernorm.weight`, [h]),
      await loadPlain(w, `${p}post_attention_layernorm.weight`, [h]),
      await loadPlain(w, `${p}self_attn_layer_scale.scale`, [h]),
      await loadPlain(w, `${p}mlp_layer_scale.scale`, [h]),
    );
  }

  forward(e: Engine, c: CodecDecoderTransformerConfig, x: Tensor, rot: { cos: Tensor; sin: Tensor }): Tensor {
    const eps = c.rmsNormEps;
    return e.chain(
      () => rmsNorm(e, x, { weight: this.input_layernorm, eps }),
      (h) => this.self_attn.forward(e, c, h, x, this.self_attn_layer_scale, rot), // x1
      (x1) =>
        e.chain(
          () => rmsNorm(e, x1, { weight: this.post_attention_layernorm, eps }),
          (h2) => linear(e, h2, this.mlp.up_proj, null, { gate: linear(e, h2, this.mlp.gate_proj, null, { act: 'silu' }) }), // the gate freed with h2
          (m) => linear(e, m, this.mlp.down_proj, null, { gate: this.mlp_layer_scale, residual: x1 }), // x2; x1 freed once it exists
        ),
    );
  }

  free(): void {
    this.self_attn.free();
    for (const t of [this.mlp.gate_proj, this.mlp.up_proj, this.mlp.down_proj, this.input_layernorm, this.post_attention_layernorm, this.self_attn_layer_scale, this.mlp_layer_scale]) t.free();
  }
}

export class CodecDecoderTransformer {
  constructor(
    readonly config: CodecDecoderTransformerConfig,
    readonly input_proj: { weight: Tensor; bias: Tensor },
    readonly layers: CodecDecoderLayer[],
    readonly norm: Tensor,
    readonly output_proj: { weight: Tensor; bias: Tensor },
  ) {}

  /** `p`: "decoder.pre_transformer." (plus any outer prefix). */
  static async load(w: WeightLoader, c: CodecDecoderTransformerConfig, p: string): Promise<CodecDecoderTransformer> {
    const { hiddenSize: h, latentDim: lat } = c;
    const input_proj = { weight: await loadPlain(w, `${p}input_proj.weight`, [h, lat]), bias: await loadPlain(w, `${p}input_proj.bias`, [h]) };
    const layers: CodecDecoderLayer[] = [];
    for (let i = 0; i < c.numLayers; i++) layers.push(await CodecDecoderLayer.load(w, c, `${p}layers.${i}.`));
    const norm = await loadPlain(w, `${p}norm.weight`, [h]);
    const output_proj = { weight: await loadPlain(w, `${p}output_proj.weight`, [lat, h]), bias: await loadPlain(w, `${p}output_proj.bias`, [lat]) };
    return new CodecDecoderTransformer(c, input_proj, layers, norm, output_proj);
  }

  /** x (1, L, latent) -> (1, L, latent). */
  forward(e: Engine, x: Tensor): Tensor {
    const c = this.config;
    return e.scope(() => {
      const rot = ropeTables(e, x.shape[1]!, c.headDim, c.ropeTheta); // freed with the scope
      return e.chain(
        () => linear(e, x, this.input_proj.weight, this.input_proj.bias),
        ...this.layers.map((layer) => (h: Tensor) => layer.forward(e, c, h, rot)),
        (h) => rmsNorm(e, h, { weight: this.norm, eps: c.rmsNormEps }),
        (n) => linear(e, n, this.output_proj.weight, this.output_proj.bias),
      );
    });
  }

  free(): void {
    for (const l of this.layers) l.free();
    for (const t of [this.input_proj.weight, this.input_proj.bias, this.norm, this.output_proj.weight, this.output_proj.bias]) t.free();
  }
}

export interface MimiTransformerConfig extends CodecAttentionShape {
  intermediateSize: number;
  numLayers: number;
  normEps: number;
}

/** One MimiTransformerLayer. */
export class MimiTransformerLayer {
  constructor(
    readonly self_attn: CodecSelfAttention,
    readonly mlp: { fc1: Tensor; fc2: Tensor },
    readonly input_layernorm: { weight: Tensor; bias: Tensor },
    readonly post_attention_layernorm: { weight: Tensor; bias: Tensor },
    readonly self_attn_layer_scale: Tensor,
    readonly mlp_layer_scale: Tensor,
  ) {}

  static async load(w: WeightLoader, c: MimiTransformerConfig, p: string): Promise<MimiTransformerLayer> {
    const { hiddenSize: h, intermediateSize: f } = c;
    const norm = async (name: string) => ({ weight: await loadPlain(w, `${p}${name}.weight`, [h]), bias: await loadPlain(w, `${p}${name}.bias`, [h]) });
    return new MimiTransformerLayer(
      await CodecSelfAttention.load(w, c, `${p}self_attn.`),
      { fc1: await loadPlain(w, `${p}mlp.fc1.weight`, [f, h]), fc2: await loadPlain(w, `${p}mlp.fc2.weight`, [h, f]) },
      await norm('input_layernorm'),
      await norm('post_attention_layernorm'),
      await loadPlain(w, `${p}self_attn_layer_scale.scale`, [h]),
      await loadPlain(w, `${p}mlp_layer_scale.scale`, [h]),
    );
  }

  forward(e: Engine, c: MimiTransformerConfig, x: Tensor, rot: { cos: Tensor; sin: Tensor }): Tensor {
    const eps = c.normEps;
    return e.chain(
      () => layerNorm(e, x, { ...this.input_layernorm, eps }),
      (h) => this.self_attn.forward(e, c, h, x, this.self_attn_layer_scale, rot), // x1
      (x1) =>
        e.chain(
          () => layerNorm(e, x1, { ...this.post_attention_layernorm, eps }),
          (h2) => linear(e, h2, this.mlp.fc1, null, { act: 'gelu_erf' }),
          (f) => linear(e, f, this.mlp.fc2, null, { gate: this.mlp_layer_scale, residual: x1 }), // x2; x1 freed once it exists
        ),
    );
  }

  free(): void {
    this.self_attn.free();
    for (const t of [this.mlp.fc1, this.mlp.fc2, this.input_layernorm.weight, this.input_layernorm.bias, this.post_attention_layernorm.weight,
      this.post_attention_layernorm.bias, this.self_attn_layer_scale, this.mlp_layer_scale]) t.free();
  }
}

export class MimiTransformer {
  constructor(
    readonly config: MimiTransformerConfig,
    readonly layers: MimiTransformerLayer[],
  ) {}

  /** `p`: "encoder.encoder_transformer.". */
  static async load(w: WeightLoader, c: MimiTransformerConfig, p: string): Promise<MimiTransformer> {
    const layers: MimiTransformerLayer[] = [];
    for (let i = 0; i < c.numLayers; i++) layers.push(await MimiTransformerLayer.load(w, c, `${p}layers.${i}.`));
    return new MimiTransformer(c, layers);
  }

  /** x (1, L, hidden) -> (1, L, hidden); x is left to the caller. */
  forward(e: Engine, x: Tensor): Tensor {
    const c = this.config;
    if (this.layers.length === 0) return contiguous(e, x);
    return e.scope(() => {
      const rot = ropeTables(e, x.shape[1]!, c.headDim, c.ropeTheta); // freed with the scope
      return e.chain(() => x, ...this.layers.map((layer) => (h: Tensor) => layer.forward(e, c, h, rot))); // x is not the chain's: left alone
    });
  }

  free(): void {
    for (const l of this.layers) l.free();
  }
}

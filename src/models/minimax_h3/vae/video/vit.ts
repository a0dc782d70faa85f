// The MiniMax H3 ViT3D video decoder (diffusers MiniMaxH3VideoViTDecoder3d) plus post_quant_conv, on one latent
// tile. Field names are the checkpoint's key paths:
//   post_quant_conv.{weight [C, C, 1, 1, 1], bias}        a 1x1x1 conv = a linear over the latent channels
//   decoder.proj_in.{weight [D, C], bias}                   one token per latent voxel, (t, h, w) row-major
//   decoder.register_tokens [1, R, D]                        appended after the voxels, then one all-zero token
//   decoder.transformer_blocks.N.{norm1,norm2}.weight        RMSNorm (affine)
//   decoder.transformer_blocks.N.attn.to_{q,k,v,out.0}.{weight,bias}   q/k RMSNorm per head (no affine)
//   decoder.transformer_blocks.N.ff.net.{0.proj,2}.{weight,bias}       SwiGLU, net.0.proj = [value | gate]
//   decoder.transformer_blocks.N.scale{1,2} [D]              residual scales: x += scale * branch(norm(x))
//   decoder.norm_out.{weight,bias}                           LayerNorm
//   decoder.proj_out.{weight [3 * pt * p * p, D], bias}      token -> (c, a, b, d) pixel block
// Shapes: a tile of T x h x w latents is x [1, N + R + 1, D] with N = T * h * w.
import type { Engine } from '../../../../engine/engine';
import { glu } from '../../../../engine/ops/activation';
import { attention } from '../../../../engine/ops/attention';
import { contiguous } from '../../../../engine/ops/elementwise';
import { concat } from '../../../../engine/ops/layout';
import { linear, type LinearOptions } from '../../../../engine/ops/linear';
import { headRmsNorm, layerNorm, rmsNorm } from '../../../../engine/ops/norm';
import { rope } from '../../../../engine/ops/rope';
import { ropeAxes, uploadRope } from '../../../../engine/rope-tables';
import type { Tensor } from '../../../../engine/tensor';
import { freeLinear, loadLinear, loadPlain, type LinearWeight, type WeightLoader } from '../../../common/weights';
import { vaeDim, type VideoVaeConfig } from './config';

/** nn.Linear with bias. */
interface Linear {
  weight: LinearWeight;
  bias: Tensor;
}

async function loadLinearB(w: WeightLoader, p: string, n: number, k: number): Promise<Linear> {
  return { weight: await loadLinear(w, `${p}.weight`, [n, k]), bias: await loadPlain(w, `${p}.bias`, [n]) };
}

const applyLinear = (e: Engine, m: Linear, x: Tensor, epi: LinearOptions = {}): Tensor => linear(e, x, m.weight, m.bias, epi);

function freeLinearB(m: Linear): void {
  freeLinear(m.weight);
  m.bias.free();
}

/** RoPE tables of a tile: f32 [N + R + 1, ropeDim / 2]; registers and the zero token sit at position 0. */
export interface TileRope {
  cos: Tensor;
  sin: Tensor;
}

/**
 * Upstream MiniMaxH3VideoRotaryPosEmbed: per axis the coordinate 2 * (i + 0.5) / size - 1 in [-1, 1), angle
 * 2 pi * coordinate * theta^(-6k / ropeDim) for k < ropeDim / 6; the (t, h, w) angles are concatenated and rotated
 * rotate-half style (pair j turns head dims j and j + ropeDim / 2). Computed in float64.
 */
export function tileRope(e: Engine, c: VideoVaeConfig, T: number, h: number, w: number): TileRope {
  const n = T * h * w;
  const rows = n + c.numRegisterTokens + 1;
  const axes = [new Float64Array(rows), new Float64Array(rows), new Float64Array(rows)];
  const coord = (i: number, size: number) => 2 * Math.PI * (2 * ((i + 0.5) / size) - 1);
  for (let i = 0; i < n; i++) {
    axes[0]![i] = coord(Math.floor(i / (h * w)), T);
    axes[1]![i] = coord(Math.floor(i / w) % h, h);
    axes[2]![i] = coord(i % w, w);
  }
  const third = c.ropeDim / 3;
  return uploadRope(e, ropeAxes(axes, [third, third, third], c.ropeTheta));
}

class VaeAttention {
  constructor(
    readonly to_q: Linear,
    readonly to_k: Linear,
    readonly to_v: Linear,
    readonly to_out: readonly [Linear],
  ) {}

  static async load(w: WeightLoader, c: VideoVaeConfig, p: string): Promise<VaeAttention> {
    const d = vaeDim(c);
    return new VaeAttention(
      await loadLinearB(w, `${p}to_q`, d, d),
      await loadLinearB(w, `${p}to_k`, d, d),
      await loadLinearB(w, `${p}to_v`, d, d),
      [await loadLinearB(w, `${p}to_out.0`, d, d)],
    );
  }

  /** Bidirectional attention over x [1, L, D] (normed); the epilogue (scale, residual) goes on to_out. */
  forward(e: Engine, c: VideoVaeConfig, x: Tensor, rot: TileRope, epi: LinearOptions): Tensor {
    const [B, L] = x.shape as [number, number, number];
    const { numHeads: nh, headDim: hd } = c;
    // chains free each step's input once its output exists (tensor scopes, engine/scope.ts), as the hand-placed frees did
    const project = (m: Linear, rotate: boolean): Tensor => {
      const y = () => applyLinear(e, m, x).reshape([B, L, nh, hd]);
      if (!rotate) return y();
      return e.chain(
        y,
        (t) => headRmsNorm(e, t, undefined, c.normEps), // statistics in f32 whatever the dtype, as upstream
        (n) => rope(e, n, rot.cos, rot.sin),
      );
    };
    const heads = (t: Tensor) => t.permute([0, 2, 1, 3]);
    return e.chain(
      // q, k, v freed once the attention exists
      () => attention(e, heads(project(this.to_q, true)), heads(project(this.to_k, true)), heads(project(this.to_v, false))),
      (att) => contiguous(e, heads(att)),
      (merged) => applyLinear(e, this.to_out[0], merged.reshape([B, L, nh * hd]), epi),
    );
  }

  free(): void {
    for (const m of [this.to_q, this.to_k, this.to_v, this.to_out[0]]) freeLinearB(m);
  }
}

class VaeTransformerBlock {
  constructor(
    readonly norm1: Tensor,
    readonly attn: VaeAttention,
    readonly scale1: Tensor,
    readonly norm2: Tensor,
    readonly ff: { net: { 0: { proj: Linear }; 2: Linear } },
    readonly scale2: Tensor,
  ) {}

  static async load(w: WeightLoader, c: VideoVaeConfig, p: string): Promise<VaeTransformerBlock> {
    const d = vaeDim(c);
    const f = d * c.ffnMult;
    return new VaeTransformerBlock(
      await loadPlain(w, `${p}norm1.weight`, [d]),
      await VaeAttention.load(w, c, `${p}attn.`),
      await loadPlain(w, `${p}scale1`, [d]),
      await loadPlain(w, `${p}norm2.weight`, [d]),
      { net: { 0: { proj: await loadLinearB(w, `${p}ff.net.0.proj`, 2 * f, d) }, 2: await loadLinearB(w, `${p}ff.net.2`, d, f) } },
      await loadPlain(w, `${p}scale2`, [d]),
    );
  }

  /** x + scale1 * attn(norm1(x)), then + scale2 * ff(norm2(x)); x is not freed. */
  forward(e: Engine, c: VideoVaeConfig, x: Tensor, rot: TileRope): Tensor {
    return e.scope(() => {
      // h1 freed once x1 exists; the FFN's steps each once the next exists, x1 once x2 does
      const x1 = e.scope(() => this.attn.forward(e, c, rmsNorm(e, x, { weight: this.norm1, eps: c.normEps }), rot, { gate: this.scale1, residual: x }));
      return e.chain(
        () => rmsNorm(e, x1, { weight: this.norm2, eps: c.normEps }),
        (h2) => applyLinear(e, this.ff.net[0].proj, h2),
        (vg) => glu(e, 'silu', vg, undefined, { gateFirst: false }), // value * silu(gate)
        (m) => applyLinear(e, this.ff.net[2], m, { gate: this.scale2, residual: x1 }),
      );
    });
  }

  free(): void {
    for (const t of [this.norm1, this.scale1, this.norm2, this.scale2]) t.free();
    this.attn.free();
    freeLinearB(this.ff.net[0].proj);
    freeLinearB(this.ff.net[2]);
  }
}

/** Intermediates for tests, named as the golden fixture's outputs; the tensors are freed after the call. */
export type Capture = (name: 'post_quant_conv' | 'patch_embed' | 'block0' | 'unpatchify_in', t: Tensor) => void;

/** post_quant_conv + decoder: the GPU part of decoding one latent tile. */
export class VaeViTDecoder {
  private constructor(
    readonly cfg: VideoVaeConfig,
    readonly post_quant_conv: Linear,
    readonly decoder: {
      proj_in: Linear;
      /** register_tokens [1, R, D] followed by the all-zero token: [1, R + 1, D]. */
      suffix: Tensor;
      transformer_blocks: VaeTransformerBlock[];
      norm_out: { weight: Tensor; bias: Tensor };
      proj_out: Linear;
    },
  ) {}

  static async load(w: WeightLoader, c: VideoVaeConfig, prefix = ''): Promise<VaeViTDecoder> {
    const C = c.latentChannels;
    const d = vaeDim(c);
    const p = `${prefix}decoder.`;
    // the 1x1x1 conv weight [C, C, 1, 1, 1] is a linear weight [C, C]
    const pqw = await loadPlain(w, `${prefix}post_quant_conv.weight`, [C, C, 1, 1, 1]);
    const post = { weight: pqw.reshape([C, C]), bias: await loadPlain(w, `${prefix}post_quant_conv.bias`, [C]) };
    const regKey = `${p}register_tokens`;
    w.ckpt.entry(regKey, [1, c.numRegisterTokens, d]);
    const reg = await w.ckpt.readFloat32(regKey);
    const suffixHost = new Float32Array((c.numRegisterTokens + 1) * d);
    suffixHost.set(reg);
    const suffix = w.e.upload(suffixHost, [1, c.numRegisterTokens + 1, d], w.dtype, regKey);
    w.loaded.push(suffix);
    const blocks: VaeTransformerBlock[] = [];
    const proj_in = await loadLinearB(w, `${p}proj_in`, d, C);
    for (let n = 0; n < c.numLayers; n++) blocks.push(await VaeTransformerBlock.load(w, c, `${p}transformer_blocks.${n}.`));
    const norm_out = { weight: await loadPlain(w, `${p}norm_out.weight`, [d]), bias: await loadPlain(w, `${p}norm_out.bias`, [d]) };
    const proj_out = await loadLinearB(w, `${p}proj_out`, c.outChannels * c.patchT * c.patch * c.patch, d);
    return new VaeViTDecoder(c, post, { proj_in, suffix, transformer_blocks: blocks, norm_out, proj_out });
  }

  /**
   * z [1, N, C] de-normalised latents of a T x h x w tile, tokens (t, h, w) row-major (the compute dtype) ->
   * [1, N, outChannels * pt * p * p] patch rows, each laid out (c, a, b, d) as upstream's un-patchify reads it.
   */
  forward(e: Engine, z: Tensor, rot: TileRope, capture?: Capture): Tensor {
    const c = this.cfg;
    const dec = this.decoder;
    const N = z.shape[1]!;
    // a test's capture runs outside the scopes: the copies it makes are its own
    const cap = (name: Parameters<Capture>[0], t: Tensor) => {
      if (capture) e.unscoped(() => capture(name, t));
      return t;
    };
    // each step's input freed once its output exists
    return e.chain(
      () => cap('post_quant_conv', applyLinear(e, this.post_quant_conv, z)),
      (pq) => cap('patch_embed', applyLinear(e, dec.proj_in, pq)),
      (emb) => concat(e, [emb, dec.suffix], 1),
      ...dec.transformer_blocks.map((b, i) => (x: Tensor) => {
        const y = b.forward(e, c, x, rot);
        return i === 0 ? cap('block0', y) : y;
      }),
      // only the voxel tokens reach the pixels (norm_out and proj_out are per token)
      (x) => layerNorm(e, x.slice(1, 0, N), { weight: dec.norm_out.weight, bias: dec.norm_out.bias, eps: c.normEps }),
      (n) => cap('unpatchify_in', applyLinear(e, dec.proj_out, n)),
    );
  }

  free(): void {
    freeLinearB(this.post_quant_conv);
    const dec = this.decoder;
    freeLinearB(dec.proj_in);
    dec.suffix.free();
    dec.transformer_blocks.forEach((b) => b.free());
    dec.norm_out.weight.free();
    dec.norm_out.bias.free();
    freeLinearB(dec.proj_out);
  }
}

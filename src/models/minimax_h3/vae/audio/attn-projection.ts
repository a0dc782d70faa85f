// MiniMax H3 audio VAE encoder's pre_block (diffusers MiniMaxH3AudioAttnProjection), between the DAC encoder and
// mean_proj / logs_proj (encoder.ts), channels-last [N, T, C]:
//
//   pre_block                    h = proj(norm3(x)) + attn(norm1(x)); h + mlp(norm2(h))         [N, T, latent_channels]
//     attn: causal attention of num_heads heads of latent_dim / num_heads (qkv without bias + [q_bias | zero_k_bias |
//     v_bias]), the heads mean-pooled, the head dim adaptively average-pooled to latent_channels, then attn.proj;
//     both poolings and attn.proj are one linear here (folded at load in float64)
//     mlp: LayerNorm, gelu_tanh(w0 x) * w1 x, w2
import type { Engine } from '../../../../engine/engine';
import { add, mul } from '../../../../engine/ops/elementwise';
import { copyInto } from '../../../../engine/ops/layout';
import { linear } from '../../../../engine/ops/linear';
import { matmul } from '../../../../engine/ops/matmul';
import { layerNorm } from '../../../../engine/ops/norm';
import { softmax } from '../../../../engine/ops/softmax';
import type { Tensor } from '../../../../engine/tensor';
import { keyOf, loadPlain, uploadTracked, type WeightLoader } from '../../../common/weights';
import type { AudioVaeEncoderConfig } from './config';
import type { AudioEncoderCapture } from './encoder';

interface LayerNormWeights {
  weight: Tensor;
  bias: Tensor;
}

async function loadLayerNorm(w: WeightLoader, p: string, d: number): Promise<LayerNormWeights> {
  return { weight: await loadPlain(w, `${p}weight`, [d]), bias: await loadPlain(w, `${p}bias`, [d]) };
}

const ln = (e: Engine, x: Tensor, n: LayerNormWeights) => layerNorm(e, x, { weight: n.weight, bias: n.bias, eps: 1e-5 });

/** F.adaptive_avg_pool1d's windows: output j averages [floor(j n / m), ceil((j + 1) n / m)). */
export function adaptivePoolWindows(n: number, m: number): [number, number][] {
  return Array.from({ length: m }, (_, j) => [Math.floor((j * n) / m), Math.ceil(((j + 1) * n) / m)] as [number, number]);
}

/** MiniMaxH3AudioAttnProjection. */
export class AttnProjection {
  constructor(
    readonly cfg: AudioVaeEncoderConfig,
    readonly norm1: LayerNormWeights,
    readonly norm3: LayerNormWeights,
    readonly norm2: LayerNormWeights,
    /** attn.qkv.weight [3D, D] and [q_bias | zero_k_bias | v_bias]. */
    readonly qkvW: Tensor,
    readonly qkvB: Tensor,
    /** attn.proj after the mean over heads and the adaptive pool: [out, D], and attn.proj.bias. */
    readonly attnOutW: Tensor,
    readonly attnOutB: Tensor,
    readonly projW: Tensor,
    readonly projB: Tensor,
    readonly mlpNorm: LayerNormWeights,
    readonly w0: [Tensor, Tensor],
    readonly w1: [Tensor, Tensor],
    readonly w2: [Tensor, Tensor],
  ) {}

  static async load(w: WeightLoader, p: string, c: AudioVaeEncoderConfig): Promise<AttnProjection> {
    const D = c.latentDim;
    const out = c.latentChannels;
    const H = c.numHeads;
    const hd = D / H;
    const host = async (key: string, shape: number[]) => {
      w.ckpt.entry(keyOf(w, `${p}${key}`), shape);
      return w.ckpt.readFloat32(keyOf(w, `${p}${key}`));
    };
    // [q_bias | zero_k_bias | v_bias]: the key bias is a zero buffer upstream; a checkpoint without it gets zeros
    const bias = new Float32Array(3 * D);
    bias.set(await host('attn.q_bias', [D]), 0);
    if (w.ckpt.has(keyOf(w, `${p}attn.zero_k_bias`))) bias.set(await host('attn.zero_k_bias', [D]), D);
    bias.set(await host('attn.v_bias', [D]), 2 * D);
    // attn.proj (W [out, out]) after mean over heads and adaptive_avg_pool1d(hd -> out): one [out, H * hd] weight
    const pw = await host('attn.proj.weight', [out, out]);
    const folded = new Float64Array(out * D);
    const windows = adaptivePoolWindows(hd, out);
    for (let i = 0; i < out; i++) {
      for (const [j, [a, b]] of windows.entries()) {
        const v = pw[i * out + j]! / (H * (b - a));
        for (let h = 0; h < H; h++) for (let d = a; d < b; d++) folded[i * D + h * hd + d] += v;
      }
    }
    const lin = async (key: string, n: number, k: number): Promise<[Tensor, Tensor]> => [await loadPlain(w, `${p}${key}.weight`, [n, k]), await loadPlain(w, `${p}${key}.bias`, [n])];
    const [projW, projB] = await lin('proj', out, D);
    return new AttnProjection(
      c,
      await loadLayerNorm(w, `${p}norm1.`, D),
      await loadLayerNorm(w, `${p}norm3.`, D),
      await loadLayerNorm(w, `${p}norm2.`, out),
      await loadPlain(w, `${p}attn.qkv.weight`, [3 * D, D]),
      uploadTracked(w, bias, [3 * D], `${p}attn qkv bias`),
      uploadTracked(w, folded, [out, D], `${p}attn.proj (pooled)`),
      await loadPlain(w, `${p}attn.proj.bias`, [out]),
      projW,
      projB,
      await loadLayerNorm(w, `${p}mlp.norm.`, out),
      await lin('mlp.w0', 2 * out, out),
      await lin('mlp.w1', 2 * out, out),
      await lin('mlp.w2', out, 2 * out),
    );
  }

  /** x [N, T, D] -> [N, T, out]. */
  forward(e: Engine, x: Tensor, capture?: AudioEncoderCapture): Tensor {
    const [N, T, D] = x.shape as [number, number, number];
    const H = this.cfg.numHeads;
    const hd = D / H;
    // scopes and chains free each temporary once what it feeds exists (tensor scopes, engine/scope.ts), in the order
    // of the hand-placed frees they replace
    return e.scope(() => {
      // proj(norm3(x)) + attn(norm1(x)); side and the heads freed once it exists
      const h = e.scope(() => {
        const side = e.chain(() => ln(e, x, this.norm3), (n3) => linear(e, n3, this.projW, this.projB));
        // the heads side by side [N, T, D]; qkv and the mask freed once every item's heads are in
        const heads = e.scope(() => {
          const qkv = e.chain(() => ln(e, x, this.norm1), (n1) => linear(e, n1, this.qkvW, this.qkvB)); // [N, T, 3D]
          // causal mask [T, T]: 0 on and below the diagonal, -inf above
          const maskHost = new Float32Array(T * T);
          for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) maskHost[i * T + j] = -Infinity;
          const mask = e.upload(maskHost, [T, T], x.dtype, 'audio vae causal mask');
          const heads = e.empty([N, T, H, hd], x.dtype, 'audio vae attention');
          for (let b = 0; b < N; b++) {
            const item = qkv.slice(0, b, b + 1).reshape([T, 3, H, hd]);
            const kT = item.slice(1, 1, 2).permute([1, 2, 3, 0]); // [1, H, hd, T]
            const v = item.slice(1, 2, 3).permute([1, 2, 0, 3]); // [1, H, T, hd]
            e.scope(() => {
              const o = e.chain(
                () => mul(e, item.slice(1, 0, 1).permute([1, 2, 0, 3]), 1 / Math.sqrt(hd)), // q [1, H, T, hd]
                (q) => matmul(e, q, kT), // [1, H, T, T]
                (s) => add(e, s, mask),
                (sm) => softmax(e, sm),
                (p) => matmul(e, p, v), // [1, H, T, hd]
              );
              copyInto(e, o, heads.slice(0, b, b + 1).permute([0, 2, 1, 3]));
            });
          }
          return heads;
        });
        const flat = heads.reshape([N, T, D]);
        // a test's capture runs outside the scopes: the copies it makes are its own
        if (capture) e.scope(() => {
          const a = linear(e, flat, this.attnOutW, this.attnOutB);
          e.unscoped(() => capture('attn', a));
        });
        return linear(e, flat, this.attnOutW, this.attnOutB, { residual: side });
      });
      // the MLP's hidden rows: m and the gate freed once u exists; u and h once the output does
      const u = e.scope(() => {
        const m = e.chain(() => ln(e, h, this.norm2), (n2) => ln(e, n2, this.mlpNorm));
        const g = linear(e, m, this.w0[0], this.w0[1], { act: 'gelu_tanh' });
        return linear(e, m, this.w1[0], this.w1[1], { gate: g });
      });
      return linear(e, u, this.w2[0], this.w2[1], { residual: h });
    });
  }

  free(): void {
    const all = [this.norm1, this.norm3, this.norm2, this.mlpNorm].flatMap((n) => [n.weight, n.bias]);
    [...all, this.qkvW, this.qkvB, this.attnOutW, this.attnOutB, this.projW, this.projB, ...this.w0, ...this.w1, ...this.w2].forEach((t) => t.free());
  }
}

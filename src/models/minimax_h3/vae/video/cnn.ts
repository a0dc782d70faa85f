// MiniMax H3 video VAE encoder network (diffusers MiniMaxH3VideoEncoder3d + quant_conv), under the checkpoint's keys:
//
//   encoder.conv_in                 CausalConv3d(3 -> C0, k 3): reflect pad 1 in h, w; 2 zero frames in front
//   encoder.down_blocks.<i>         resnets.<j> (GroupNorm per frame + SiLU, conv1, GroupNorm + SiLU, conv2,
//                                   conv_shortcut 1x1x1 where the width changes; x + h), then downsamplers.0.conv
//                                   (k 3, stride (t_i, s_i, s_i); a spatial stride of 2 reflect-pads 1 at the
//                                   bottom/right first) where t_i * s_i > 1
//   encoder.norm_out, SiLU, encoder.conv_out (-> 2 x latent channels), quant_conv (1x1x1)
// Activations are channels-last [1, T, H, W, C]; encoder.ts walks the clips and tiles through it.
import type { Engine } from '../../../../engine/engine';
import { conv3d, type PreparedConvWeight } from '../../../../engine/ops/conv';
import { add } from '../../../../engine/ops/elementwise';
import { copy, pad } from '../../../../engine/ops/layout';
import { groupNorm } from '../../../../engine/ops/norm';
import type { Tensor } from '../../../../engine/tensor';
import { loadConvWeight } from '../../../common/conv-weights';
import { loadPlain, type WeightLoader } from '../../../common/weights';
import type { VideoVaeEncoderConfig } from './config';

/** Intermediates of the first encoder call (first clip, first tile), channels-last [1, T, H, W, C]. */
export type EncoderCapture = (name: string, t: Tensor) => void;

/** MiniMaxH3VideoCausalConv3d: symmetric reflect padding in h, w; temporal_padding zero frames in front. */
class CausalConv3d {
  constructor(
    readonly weight: PreparedConvWeight,
    readonly bias: Tensor,
    readonly stride: [number, number, number],
    readonly spatialPad: number,
    readonly temporalPad: number,
  ) {}

  static async load(w: WeightLoader, p: string, cin: number, cout: number, k: number, o: { stride?: [number, number, number]; spatialPad?: number; temporalPad?: number } = {}): Promise<CausalConv3d> {
    const weight = await loadConvWeight(w, `${p}weight`, [cout, cin, k, k, k]);
    return new CausalConv3d(weight, await loadPlain(w, `${p}bias`, [cout]), o.stride ?? [1, 1, 1], o.spatialPad ?? 0, o.temporalPad ?? 0);
  }

  /** x [1, T, H, W, Cin] (not consumed) -> [1, T', H', W', Cout]. */
  forward(e: Engine, x: Tensor): Tensor {
    const s = this.spatialPad;
    // the padded copy freed once the conv exists
    return e.scope(() => conv3d(e, s > 0 ? pad(e, x, [[s, s], [s, s], [0, 0]], 'reflect') : x, this.weight, { bias: this.bias, stride: this.stride, padding: [[this.temporalPad, 0], [0, 0], [0, 0]] }));
  }

  free(): void {
    this.weight.free();
    this.bias.free();
  }
}

/** MiniMaxH3VideoGroupNorm (statistics per frame: time folded into the batch), with the SiLU that follows it fused. */
class FrameGroupNorm {
  constructor(readonly weight: Tensor, readonly bias: Tensor, readonly groups: number, readonly eps: number) {}

  static async load(w: WeightLoader, p: string, c: number, groups: number, eps: number): Promise<FrameGroupNorm> {
    return new FrameGroupNorm(await loadPlain(w, `${p}weight`, [c]), await loadPlain(w, `${p}bias`, [c]), groups, eps);
  }

  /** silu(groupnorm(x)) per frame: x [1, T, H, W, C] contiguous. */
  forwardSilu(e: Engine, x: Tensor): Tensor {
    const [, T, H, W, C] = x.shape as [number, number, number, number, number];
    const y = groupNorm(e, x.reshape([T, H * W, C]), this.groups, { weight: this.weight, bias: this.bias, eps: this.eps, silu: true });
    return y.reshape([1, T, H, W, C]);
  }

  free(): void {
    this.weight.free();
    this.bias.free();
  }
}

class ResnetBlock3d {
  constructor(
    readonly norm1: FrameGroupNorm,
    readonly conv1: CausalConv3d,
    readonly norm2: FrameGroupNorm,
    readonly conv2: CausalConv3d,
    readonly conv_shortcut: CausalConv3d | null,
  ) {}

  static async load(w: WeightLoader, p: string, c: VideoVaeEncoderConfig, cin: number, cout: number): Promise<ResnetBlock3d> {
    const conv = (q: string, i: number) => CausalConv3d.load(w, `${p}${q}.`, i, cout, 3, { spatialPad: 1, temporalPad: 2 });
    return new ResnetBlock3d(
      await FrameGroupNorm.load(w, `${p}norm1.`, cin, c.groups, c.eps),
      await conv('conv1', cin),
      await FrameGroupNorm.load(w, `${p}norm2.`, cout, c.groups, c.eps),
      await conv('conv2', cout),
      cin !== cout ? await CausalConv3d.load(w, `${p}conv_shortcut.`, cin, cout, 1) : null,
    );
  }

  forward(e: Engine, x: Tensor): Tensor {
    // each step's input freed once its output exists; h2 and the shortcut once the sum does
    return e.scope(() => {
      const h2 = e.chain(
        () => this.norm1.forwardSilu(e, x),
        (a) => this.conv1.forward(e, a),
        (h1) => this.norm2.forwardSilu(e, h1),
        (b) => this.conv2.forward(e, b),
      );
      return add(e, this.conv_shortcut ? this.conv_shortcut.forward(e, x) : x, h2);
    });
  }

  free(): void {
    [this.norm1, this.conv1, this.norm2, this.conv2, this.conv_shortcut].forEach((m) => m?.free());
  }
}

/** MiniMaxH3VideoDownsample3d: k 3, stride (t, s, s), no spatial padding but a bottom/right reflect pad of 1 when s = 2. */
class Downsample3d {
  constructor(readonly conv: CausalConv3d, readonly spatialStride: number) {}

  static async load(w: WeightLoader, p: string, c: number, t: number, s: number): Promise<Downsample3d> {
    return new Downsample3d(await CausalConv3d.load(w, `${p}conv.`, c, c, 3, { stride: [t, s, s], temporalPad: 2 }), s);
  }

  forward(e: Engine, x: Tensor): Tensor {
    // the padded copy freed once the conv exists
    return e.scope(() => this.conv.forward(e, this.spatialStride === 2 ? pad(e, x, [[0, 1], [0, 1], [0, 0]], 'reflect') : x));
  }

  free(): void {
    this.conv.free();
  }
}

class DownBlock3d {
  constructor(readonly resnets: ResnetBlock3d[], readonly downsamplers: [Downsample3d] | null) {}

  forward(e: Engine, x: Tensor): Tensor {
    const down = this.downsamplers?.[0];
    // each step's input freed once its output exists (x is the caller's); a block that does nothing returns a copy
    const h = e.chain(() => x, ...this.resnets.map((r) => (t: Tensor) => r.forward(e, t)), ...(down ? [(t: Tensor) => down.forward(e, t)] : []));
    return h === x ? copy(e, x) : h;
  }

  free(): void {
    this.resnets.forEach((r) => r.free());
    this.downsamplers?.[0].free();
  }
}

/** MiniMaxH3VideoEncoder3d + quant_conv. */
export class Encoder3d {
  constructor(
    readonly conv_in: CausalConv3d,
    readonly down_blocks: DownBlock3d[],
    readonly norm_out: FrameGroupNorm,
    readonly conv_out: CausalConv3d,
    readonly quant_conv: CausalConv3d,
  ) {}

  static async load(w: WeightLoader, c: VideoVaeEncoderConfig, prefix: string): Promise<Encoder3d> {
    const p = `${prefix}encoder.`;
    const ch = c.blockOutChannels;
    const conv_in = await CausalConv3d.load(w, `${p}conv_in.`, c.inChannels, ch[0]!, 3, { spatialPad: 1, temporalPad: 2 });
    const blocks: DownBlock3d[] = [];
    for (let i = 0; i < ch.length; i++) {
      const cin = i === 0 ? ch[0]! : ch[i - 1]!;
      const resnets: ResnetBlock3d[] = [];
      for (let j = 0; j < c.layersPerBlock; j++) resnets.push(await ResnetBlock3d.load(w, `${p}down_blocks.${i}.resnets.${j}.`, c, j === 0 ? cin : ch[i]!, ch[i]!));
      const t = c.temporalFactors[i]!;
      const s = c.spatialFactors[i]!;
      const down = t * s > 1 ? ([await Downsample3d.load(w, `${p}down_blocks.${i}.downsamplers.0.`, ch[i]!, t, s)] as [Downsample3d]) : null;
      blocks.push(new DownBlock3d(resnets, down));
    }
    const last = ch[ch.length - 1]!;
    const norm_out = await FrameGroupNorm.load(w, `${p}norm_out.`, last, c.groups, c.eps);
    const conv_out = await CausalConv3d.load(w, `${p}conv_out.`, last, 2 * c.latentChannels, 3, { spatialPad: 1, temporalPad: 2 });
    const quant_conv = await CausalConv3d.load(w, `${prefix}quant_conv.`, 2 * c.latentChannels, 2 * c.latentChannels, 1);
    return new Encoder3d(conv_in, blocks, norm_out, conv_out, quant_conv);
  }

  /** pixels [1, T, H, W, 3] (ImageNet-normalised) -> moments [1, T', H / ratio', W / ratio', 2C]. */
  forward(e: Engine, x: Tensor, capture?: EncoderCapture): Tensor {
    // a test's capture runs outside the scopes: the copies it makes are its own
    const cap = (name: string, t: Tensor) => {
      if (capture) e.unscoped(() => capture(name, t));
      return t;
    };
    // each step's input freed once its output exists
    return e.chain(
      () => cap('conv_in', this.conv_in.forward(e, x)),
      ...this.down_blocks.map((b, i) => (h: Tensor) => cap(`down_block.${i}`, b.forward(e, h))),
      (h) => this.norm_out.forwardSilu(e, h),
      (s) => cap('encoder', this.conv_out.forward(e, s)),
      (out) => this.quant_conv.forward(e, out),
    );
  }

  free(): void {
    [this.conv_in, ...this.down_blocks, this.norm_out, this.conv_out, this.quant_conv].forEach((m) => m.free());
  }
}

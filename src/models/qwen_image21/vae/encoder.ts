// The encode half: encoder.conv_in -> encoder.down_blocks (4 x 2x down, AvgDown3D shortcuts) -> mid_block ->
// norm_out, SiLU, conv_out (2 * zDim: mean | logvar) -> quant_conv. The pipeline takes latent_dist.mode() (the
// mean, quant_conv's first zDim outputs) and normalises it, (mode - latents_mean) / latents_std; both are folded
// into quant_conv at load, so encode hands out the latents the transformer reads. One image in one piece: the
// pipeline's references are about 1 megapixel (resized to output_resolution^2 area), no strips needed there.
import type { Engine } from '../../../engine/engine';
import { add } from '../../../engine/ops/elementwise';
import type { Tensor } from '../../../engine/tensor';
import type { WeightLoader } from '../../common/weights';
import { encoderLevels, encoderMidDim, type DownLevel, type QwenImage21VaeConfig } from './config';
import type { VaeCapture } from './decoder';
import { avgDownWeights, downsample2x, normSilu, runResnets, VaeConv2d, VaeMidBlock, VaeResidualBlock, VaeRmsNorm } from './modules';

/** QwenImage21ResidualDownBlock: resnets, then downsampler.resample.1 (pad right/bottom, 3x3 stride 2), + AvgDown3D(x). */
export class VaeDownBlock {
  private constructor(
    readonly resnets: VaeResidualBlock[],
    readonly downsampler: { resample: [null, VaeConv2d] } | null,
    /** AvgDown3D as a fixed conv (no checkpoint keys); null where it is the identity (same channels, no down). */
    readonly avg_shortcut: VaeConv2d | null,
  ) {}

  static async load(w: WeightLoader, p: string, c: QwenImage21VaeConfig, l: DownLevel): Promise<VaeDownBlock> {
    const resnets: VaeResidualBlock[] = [];
    for (let i = 0; i < c.numResBlocks; i++) resnets.push(await VaeResidualBlock.load(w, `${p}resnets.${i}.`, i === 0 ? l.inDim : l.outDim, l.outDim));
    const down = l.down ? { resample: [null, await VaeConv2d.load(w, `${p}downsampler.resample.1.`, l.outDim, l.outDim, 3)] as [null, VaeConv2d] } : null;
    let short: VaeConv2d | null = null;
    if (l.down || l.temporal || l.inDim !== l.outDim) {
      const { weight, k } = avgDownWeights(l.inDim, l.outDim, l.temporal, l.down);
      short = VaeConv2d.fromHost(w, weight, new Float64Array(l.outDim), l.inDim, l.outDim, k, `${p}avg_shortcut`);
    }
    return new VaeDownBlock(resnets, down, short);
  }

  forward(e: Engine, x: Tensor): Tensor {
    let h = runResnets(e, this.resnets, x);
    if (this.downsampler) {
      const d = downsample2x(e, this.downsampler.resample[1], h);
      if (h !== x) h.free();
      h = d;
    }
    const s = this.avg_shortcut ? this.avg_shortcut.forward(e, x, { stride: this.avg_shortcut.k, padding: 0 }) : x;
    const out = add(e, h, s);
    if (h !== x) h.free();
    if (s !== x) s.free();
    return out;
  }

  free(): void {
    this.resnets.forEach((r) => r.free());
    this.downsampler?.resample[1].free();
    this.avg_shortcut?.free();
  }
}

/** QwenImage21Encoder3d on one frame. */
export class VaeEncoder {
  private constructor(
    readonly conv_in: VaeConv2d,
    readonly down_blocks: VaeDownBlock[],
    readonly mid_block: VaeMidBlock,
    readonly norm_out: VaeRmsNorm,
    readonly conv_out: VaeConv2d,
  ) {}

  static async load(w: WeightLoader, p: string, c: QwenImage21VaeConfig): Promise<VaeEncoder> {
    const levels = encoderLevels(c);
    const conv_in = await VaeConv2d.load(w, `${p}conv_in.`, c.inChannels, levels[0]!.inDim, 3);
    const down: VaeDownBlock[] = [];
    for (const [i, l] of levels.entries()) down.push(await VaeDownBlock.load(w, `${p}down_blocks.${i}.`, c, l));
    const mid = encoderMidDim(c);
    return new VaeEncoder(
      conv_in,
      down,
      await VaeMidBlock.load(w, `${p}mid_block.`, mid),
      await VaeRmsNorm.load(w, `${p}norm_out.`, mid),
      await VaeConv2d.load(w, `${p}conv_out.`, mid, 2 * c.zDim, 3),
    );
  }

  /** pixels [N, H, W, inChannels] -> [N, H/16, W/16, 2 * zDim] (mean | logvar, before quant_conv). */
  forward(e: Engine, x: Tensor, capture?: VaeCapture): Tensor {
    let h = this.conv_in.forward(e, x);
    for (const [i, b] of this.down_blocks.entries()) {
      const next = b.forward(e, h);
      h.free();
      h = next;
      capture?.(`down_block.${i}`, h);
    }
    const m = this.mid_block.forward(e, h);
    h.free();
    capture?.('mid_block', m);
    const s = normSilu(e, this.norm_out, m);
    m.free();
    const out = this.conv_out.forward(e, s);
    s.free();
    capture?.('encoder', out);
    return out;
  }

  free(): void {
    [this.conv_in, ...this.down_blocks, this.mid_block, this.norm_out, this.conv_out].forEach((m) => m.free());
  }
}

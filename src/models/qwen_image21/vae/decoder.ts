// The decode half: post_quant_conv (with the pipeline's de-normalisation folded in) -> decoder.conv_in ->
// decoder.mid_block (with the one global attention) -> decoder.up_blocks (4 x 2x up) -> norm_out, SiLU, conv_out
// -> clamp to [-1, 1] (upstream _decode). Everything after the mid block is local (3x3 convs, per-pixel norms,
// nearest upsampling), so it runs in row strips of the latent grid with a halo of decoderHaloRows() latent rows on
// each side and only the strip's centre is kept: the result equals the whole-image decode while the biggest tensor
// is one strip's, which keeps a 2K decode inside the binding limit and the memory budget.
import type { Engine } from '../../../engine/engine';
import type { Tensor } from '../../../engine/tensor';
import { decodeRowStrips, planRowStrips, stripHaloRows, stripRowElements } from '../../common/row-strips';
import type { WeightLoader } from '../../common/weights';
import { decoderLevels, decoderMidDim, type QwenImage21VaeConfig, type UpLevel } from './config';
import {
  DupUpShortcut, normSilu, runResnets, upsample2x, VaeConv2d, VaeMidBlock, VaeResidualBlock, VaeRmsNorm,
} from './modules';

/** Tests: intermediates by upstream module name (post_quant_conv, conv_in, mid_block, up_block.<i>, decoder). */
export type VaeCapture = (name: string, t: Tensor) => void;

/** QwenImage21ResidualUpBlock: resnets (numResBlocks + 1), then upsampler.resample.1 after 2x nearest, + DupUp3D(x). */
export class VaeUpBlock {
  private constructor(
    readonly resnets: VaeResidualBlock[],
    /** upsampler.resample = Sequential(Upsample, Conv2d): only index 1 has weights (time_conv is unused on one frame). */
    readonly upsampler: { resample: [null, VaeConv2d] } | null,
    readonly avg_shortcut: DupUpShortcut | null,
  ) {}

  static async load(w: WeightLoader, p: string, c: QwenImage21VaeConfig, l: UpLevel): Promise<VaeUpBlock> {
    const resnets: VaeResidualBlock[] = [];
    for (let i = 0; i <= c.numResBlocks; i++) resnets.push(await VaeResidualBlock.load(w, `${p}resnets.${i}.`, i === 0 ? l.inDim : l.outDim, l.outDim));
    const up = l.up ? { resample: [null, await VaeConv2d.load(w, `${p}upsampler.resample.1.`, l.outDim, l.outDim, 3)] as [null, VaeConv2d] } : null;
    return new VaeUpBlock(resnets, up, l.up ? new DupUpShortcut(l.inDim, l.outDim, l.temporal) : null);
  }

  forward(e: Engine, x: Tensor): Tensor {
    let h = runResnets(e, this.resnets, x);
    if (this.upsampler) {
      const u = upsample2x(e, this.upsampler.resample[1], h);
      if (h !== x) h.free();
      h = u;
    }
    if (this.avg_shortcut) {
      const s = this.avg_shortcut.addTo(e, h, x);
      if (h !== x) h.free();
      h = s;
    }
    return h;
  }

  free(): void {
    this.resnets.forEach((r) => r.free());
    this.upsampler?.resample[1].free();
  }
}

/** QwenImage21Decoder3d on one frame. */
export class VaeDecoder {
  private constructor(
    readonly conv_in: VaeConv2d,
    readonly mid_block: VaeMidBlock,
    readonly up_blocks: VaeUpBlock[],
    readonly norm_out: VaeRmsNorm,
    readonly conv_out: VaeConv2d,
  ) {}

  static async load(w: WeightLoader, p: string, c: QwenImage21VaeConfig): Promise<VaeDecoder> {
    const mid = decoderMidDim(c);
    const conv_in = await VaeConv2d.load(w, `${p}conv_in.`, c.zDim, mid, 3);
    const mid_block = await VaeMidBlock.load(w, `${p}mid_block.`, mid);
    const levels = decoderLevels(c);
    const up: VaeUpBlock[] = [];
    for (const [i, l] of levels.entries()) up.push(await VaeUpBlock.load(w, `${p}up_blocks.${i}.`, c, l));
    const last = levels.at(-1)!.outDim;
    return new VaeDecoder(conv_in, mid_block, up, await VaeRmsNorm.load(w, `${p}norm_out.`, last), await VaeConv2d.load(w, `${p}conv_out.`, last, c.outChannels, 3));
  }

  /** conv_in and the mid block on the whole latent grid [N, h, w, zDim] -> [N, h, w, midDim]. */
  head(e: Engine, z: Tensor, capture?: VaeCapture): Tensor {
    const a = this.conv_in.forward(e, z);
    capture?.('conv_in', a);
    const b = this.mid_block.forward(e, a);
    a.free();
    capture?.('mid_block', b);
    return b;
  }

  /** The local part (up blocks, head) on rows of the mid block's output; returns [N, rows * 16, w * 16, outChannels], unclamped. */
  tail(e: Engine, x: Tensor, capture?: VaeCapture): Tensor {
    let h = x;
    for (const [i, b] of this.up_blocks.entries()) {
      const next = b.forward(e, h);
      if (h !== x) h.free();
      h = next;
      capture?.(`up_block.${i}`, h);
    }
    const s = normSilu(e, this.norm_out, h);
    if (h !== x) h.free();
    const out = this.conv_out.forward(e, s);
    s.free();
    return out;
  }

  free(): void {
    [this.conv_in, this.mid_block, ...this.up_blocks, this.norm_out, this.conv_out].forEach((m) => m.free());
  }
}

export interface DecodeOptions {
  /** Latent rows per strip (before the halo); default from stripBytes. */
  stripRows?: number;
  /** Budget for the largest tensor of one strip (default 2 GiB, never above the device's binding limit). */
  stripBytes?: number;
  capture?: VaeCapture;
}

/**
 * The largest tensor of a strip may fill one binding (2 GiB on NVIDIA): a 2K f16 decode is then 2 strips of 64
 * rows + 13-row halos (1.2x the up-stack work), 1K is one piece. Peak memory is about 3.5 such tensors.
 */
export const DEFAULT_STRIP_BYTES = 2 ** 31;

/**
 * Latent rows a decoder row strip needs on each side so its centre is exact: the receptive field of everything
 * after the mid block (every 3x3 conv reaches one row at its own scale; nearest upsampling and the shortcuts are
 * local, the RMS norms per pixel), in output rows, rounded up to latent rows. 13 for the released model.
 */
export function decoderHaloRows(c: QwenImage21VaeConfig): number {
  return stripHaloRows(decoderLevels(c), c.numResBlocks, c.spatialRatio);
}

/** Elements per latent row of the biggest tensor after the mid block (per image): max over levels of channels x scale^2. */
export function decoderRowElements(c: QwenImage21VaeConfig, width: number): number {
  return stripRowElements(decoderMidDim(c), decoderLevels(c), width);
}

/**
 * Latent rows -> strips [start, end) covering 0..h. Each strip is decoded from rows [start - halo, end + halo)
 * clipped to the image, so `rows + 2 * halo` latent rows must fit the budget.
 */
export function planStrips(c: QwenImage21VaeConfig, batch: number, h: number, w: number, bytesPerElement: number, o: { stripRows?: number; stripBytes: number }): [number, number][] {
  return planRowStrips(h, w, decoderHaloRows(c), decoderRowElements(c, w) * batch * bytesPerElement, o.stripBytes, o.stripRows, 'VAE decode');
}

/**
 * The whole decode of normalised latents z [N, h, w, zDim] (post_quant_conv already folded with the
 * de-normalisation) -> pixels [N, 16h, 16w, outChannels] in [-1, 1].
 */
export function decodeLatents(e: Engine, c: QwenImage21VaeConfig, post: VaeConv2d, dec: VaeDecoder, z: Tensor, o: DecodeOptions = {}): Tensor {
  const [N, h, w, C] = z.shape as [number, number, number, number];
  if (z.rank !== 4 || C !== c.zDim) throw new RangeError(`VAE decode: latents ${z} must be [N, h, w, ${c.zDim}]`);
  const r = c.spatialRatio;
  const budget = Math.min(o.stripBytes ?? DEFAULT_STRIP_BYTES, e.pool.maxBindingBytes);
  const strips = planStrips(c, N, h, w, z.bytesPerElement, { stripRows: o.stripRows, stripBytes: budget });
  const halo = decoderHaloRows(c);
  const take = o.capture;
  if (take) o = { ...o, capture: (name, t) => e.unscoped(() => take(name, t)) }; // the strips run in tensor scopes: what a capture copies is its own
  const p = post.forward(e, z);
  o.capture?.('post_quant_conv', p);
  const mid = dec.head(e, p, o.capture);
  p.free();
  return decodeRowStrips(e, mid, {
    strips, halo, spatialRatio: r, outChannels: c.outChannels, dtype: z.dtype, label: 'vae decode',
    tail: (x, whole) => {
      const y = dec.tail(e, x, whole ? o.capture : undefined);
      if (whole) o.capture?.('decoder', y);
      return y;
    },
  });
}

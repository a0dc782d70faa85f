// The decode half: post_quant_conv (with the pipeline's de-normalisation folded in) -> decoder.conv_in ->
// decoder.mid_block (with the one global attention) -> decoder.up_blocks (4 x 2x up) -> norm_out, SiLU, conv_out
// -> clamp to [-1, 1] (upstream _decode). Everything after the mid block is local (3x3 convs, per-pixel norms,
// nearest upsampling), so it runs in row strips of the latent grid with a halo of decoderHaloRows() latent rows on
// each side and only the strip's centre is kept: the result equals the whole-image decode while the biggest tensor
// is one strip's, which keeps a 2K decode inside the binding limit and the memory budget.
import type { Engine } from '../../../engine/engine';
import { copyInto } from '../../../engine/ops/layout';
import { clamp } from '../../../engine/ops/unary';
import type { Tensor } from '../../../engine/tensor';
import type { WeightLoader } from '../../common/weights';
import { decoderHaloRows, decoderLevels, decoderMidDim, type QwenImage21VaeConfig, type UpLevel } from './config';
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

/** Elements per latent row of the biggest tensor after the mid block (per image): max over levels of channels x scale^2. */
export function decoderRowElements(c: QwenImage21VaeConfig, width: number): number {
  let scale = 1;
  let most = decoderMidDim(c);
  for (const l of decoderLevels(c)) {
    most = Math.max(most, l.inDim * scale * scale, l.outDim * scale * scale);
    if (l.up) scale *= 2;
    most = Math.max(most, l.outDim * scale * scale); // nearest 2x of the resnets' output, the conv, the shortcut sum
  }
  return most * width;
}

/**
 * Latent rows -> strips [start, end) covering 0..h. Each strip is decoded from rows [start - halo, end + halo)
 * clipped to the image, so `rows + 2 * halo` latent rows must fit the budget.
 */
export function planStrips(c: QwenImage21VaeConfig, batch: number, h: number, w: number, bytesPerElement: number, o: { stripRows?: number; stripBytes: number }): [number, number][] {
  const halo = decoderHaloRows(c);
  let rows = o.stripRows;
  if (rows === undefined) {
    const perRow = decoderRowElements(c, w) * batch * bytesPerElement;
    const fit = Math.floor(o.stripBytes / perRow);
    if (fit >= h) rows = h;
    else if (fit - 2 * halo < 1) throw new RangeError(`VAE decode: a ${h}x${w} latent needs ${perRow} bytes per latent row; ${o.stripBytes} bytes do not hold one row plus a ${halo}-row halo each side`);
    else rows = Math.ceil(h / Math.ceil(h / (fit - 2 * halo))); // as few strips as fit, of even height
  }
  if (!Number.isInteger(rows) || rows < 1) throw new RangeError(`VAE decode: stripRows ${rows} must be a positive integer`);
  const out: [number, number][] = [];
  for (let s = 0; s < h; s += rows) out.push([s, Math.min(h, s + rows)]);
  return out;
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
  const p = post.forward(e, z);
  o.capture?.('post_quant_conv', p);
  const mid = dec.head(e, p, o.capture);
  p.free();
  const out = e.empty([N, h * r, w * r, c.outChannels], z.dtype, 'vae decode');
  try {
    for (const [s0, s1] of strips) {
      const a = Math.max(0, s0 - halo);
      const b = Math.min(h, s1 + halo);
      const one = strips.length === 1;
      const x = one ? mid : mid.slice(1, a, b);
      const y = dec.tail(e, x, one ? o.capture : undefined);
      if (one) o.capture?.('decoder', y);
      const clamped = clamp(e, y.slice(1, (s0 - a) * r, (s1 - a) * r), -1, 1);
      y.free();
      copyInto(e, clamped, out.slice(1, s0 * r, s1 * r));
      clamped.free();
    }
  } catch (err) {
    out.free();
    throw err;
  } finally {
    mid.free();
  }
  return out;
}

// Row-strip decoding for the Wan-style image VAEs (Qwen-Image's in krea2, Qwen-Image-2.1's): everything after the
// decoder's mid block is local (3x3 convs, nearest upsampling, per-pixel norms), so it runs on row strips of the latent
// grid, each widened by a halo of latent rows on both sides, and only the strip's centre is kept. The result equals
// the whole-image decode while the biggest tensor is one strip's, which keeps a 2K decode inside the device's binding
// limit and the memory budget. The model says what its levels are; the planning and the loop are here.
import type { DType } from '../../engine/dtype';
import type { Engine } from '../../engine/engine';
import { copyInto } from '../../engine/ops/layout';
import { clamp } from '../../engine/ops/unary';
import type { Tensor } from '../../engine/tensor';

/** One level of the up stack after the mid block: its widths, and whether it ends in a 2x upsampler. */
export interface StripLevel {
  inDim: number;
  outDim: number;
  up: boolean;
}

/**
 * Latent rows a strip needs on each side so its centre is exact: the reach of everything after the mid block (two
 * 3x3 convs per resnet and the upsampler's conv, each one row at its own scale; conv_out one output row), in output
 * rows, rounded up to latent rows. 13 for the released Qwen-Image VAEs.
 */
export function stripHaloRows(levels: readonly StripLevel[], numResBlocks: number, spatialRatio: number): number {
  let reach = 0; // output rows
  let scale = 1;
  for (const l of levels) {
    reach += (2 * (numResBlocks + 1) * spatialRatio) / scale; // two 3x3 convs per resnet
    if (l.up) {
      scale *= 2;
      reach += spatialRatio / scale; // the upsampler's conv
    }
  }
  reach += 1; // conv_out
  return Math.ceil(reach / spatialRatio);
}

/** Elements per latent row (per image, `width` latents wide) of the biggest tensor after the mid block: max over levels of channels x scale^2. */
export function stripRowElements(midDim: number, levels: readonly StripLevel[], width: number): number {
  let scale = 1;
  let most = midDim;
  for (const l of levels) {
    most = Math.max(most, l.inDim * scale * scale, l.outDim * scale * scale);
    if (l.up) {
      scale *= 2;
      most = Math.max(most, l.outDim * scale * scale); // the nearest 2x of the resnets' output, its conv, a shortcut sum
    }
  }
  return most * width;
}

/**
 * Latent rows -> strips [start, end) covering 0..h (of an h x w latent). Each strip is decoded from rows
 * [start - halo, end + halo) clipped to the image, so `rows + 2 * halo` latent rows (of `bytesPerRow` each) must fit
 * `budget`; as few strips as fit, of even height. `stripRows` overrides the height (tests). `what` names the decoder
 * in errors.
 */
export function planRowStrips(h: number, w: number, halo: number, bytesPerRow: number, budget: number, stripRows: number | undefined, what: string): [number, number][] {
  let rows = stripRows;
  if (rows === undefined) {
    const fit = Math.floor(budget / bytesPerRow);
    if (fit >= h) rows = h;
    else if (fit - 2 * halo < 1) throw new RangeError(`${what}: a ${h}x${w} latent needs ${bytesPerRow} bytes per latent row; ${budget} bytes do not hold one row plus a ${halo}-row halo each side`);
    else rows = Math.ceil(h / Math.ceil(h / (fit - 2 * halo)));
  }
  if (!Number.isInteger(rows) || rows < 1) throw new RangeError(`${what}: stripRows ${rows} must be a positive integer`);
  const out: [number, number][] = [];
  for (let s = 0; s < h; s += rows) out.push([s, Math.min(h, s + rows)]);
  return out;
}

export interface RowStripDecode {
  /** The strips (planRowStrips) and their halo, in latent rows. */
  strips: readonly [number, number][];
  halo: number;
  /** Output rows per latent row. */
  spatialRatio: number;
  /** Output channels (the last axis of the pixels). */
  outChannels: number;
  /** The pixels' dtype. */
  dtype: DType;
  /** The up stack and head on latent rows of the mid block's output [N, rows, w, C] -> [N, rows * ratio, w * ratio, outChannels], unclamped. `whole`: the strip is the whole image (captures may be taken). */
  tail: (rows: Tensor, whole: boolean) => Tensor;
  label: string;
}

/**
 * The mid block's output [N, h, w, C] (consumed: freed here) -> pixels [N, h * ratio, w * ratio, outChannels] clamped to
 * [-1, 1] (upstream _decode), strip by strip.
 */
export function decodeRowStrips(e: Engine, mid: Tensor, d: RowStripDecode): Tensor {
  const [N, h, w] = mid.shape as [number, number, number, number];
  const r = d.spatialRatio;
  try {
    return e.scope(() => {
      const out = e.empty([N, h * r, w * r, d.outChannels], d.dtype, d.label); // freed by the scope if a strip throws
      for (const [s0, s1] of d.strips) {
        const lo = Math.max(0, s0 - d.halo);
        const hi = Math.min(h, s1 + d.halo);
        const whole = d.strips.length === 1;
        // the strip's pixels freed once clamped, the clamped rows once copied (engine/scope.ts)
        e.scope(() => {
          const clamped = e.chain(() => d.tail(whole ? mid : mid.slice(1, lo, hi), whole), (y) => clamp(e, y.slice(1, (s0 - lo) * r, (s1 - lo) * r), -1, 1));
          copyInto(e, clamped, out.slice(1, s0 * r, s1 * r));
        });
      }
      return out;
    });
  } finally {
    mid.free();
  }
}

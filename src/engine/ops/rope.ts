// Rotary position embedding: applies a cos/sin table (src/engine/rope-tables.ts) to queries or keys.
//   shader:    shaders/rope.wgsl (entry main; overrides INTERLEAVED, WG)
//   reference: test/engine/reference/rope.ts
//   tests:     test/engine/rope.test.ts
import type { Engine } from '../engine';
import { Params } from '../kernels';
import { grid1d } from '../recorder';
import type { Tensor } from '../tensor';
import { outputTensor, sameShape } from './checks';

export type RopeStyle = 'half' | 'interleaved';

export interface RopeOptions {
  /** 'half' (rotate-half: GPT-NeoX, Qwen; default) or 'interleaved' (pairs 2j, 2j+1: GPT-J, Flux, Qwen-Image). */
  style?: RopeStyle;
  out?: Tensor;
}

const WG = 256;

/**
 * x [B, L, H, D] or [L, H, D] (any view) rotated by cos/sin f32 tables [L, P] or [B|1, L, P] (views allowed):
 * the first 2P head dims are rotated, the rest copied. Returns a new contiguous tensor of x's shape, or `out`: a
 * contiguous view of that shape at any element offset.
 */
export function rope(e: Engine, x: Tensor, cos: Tensor, sin: Tensor, opts: RopeOptions = {}): Tensor {
  const op = 'rope';
  if (x.dtype !== 'f32' && x.dtype !== 'f16') throw new TypeError(`${op}: x ${x}: only f32 and f16 tensors`);
  if (x.rank !== 3 && x.rank !== 4) throw new RangeError(`${op}: x ${x} must be [B, L, H, D] or [L, H, D]`);
  const x4 = x.rank === 3 ? x.unsqueeze(0) : x;
  const [B, L, H, D] = x4.shape as [number, number, number, number];
  if (cos.dtype !== 'f32' || sin.dtype !== 'f32') throw new TypeError(`${op}: tables cos ${cos} / sin ${sin} must be f32`);
  if (!sameShape(cos.shape, sin.shape) || !sameShape(cos.strides, sin.strides)) {
    throw new RangeError(`${op}: cos ${cos} and sin ${sin} differ in shape or layout`);
  }
  if (cos.rank !== 2 && cos.rank !== 3) throw new RangeError(`${op}: tables ${cos} must be [L, P] or [B, L, P]`);
  const c3 = cos.rank === 2 ? cos.unsqueeze(0) : cos;
  const s3 = sin.rank === 2 ? sin.unsqueeze(0) : sin;
  const [tb, tl, P] = c3.shape as [number, number, number];
  if (tl !== L || (tb !== 1 && tb !== B)) throw new RangeError(`${op}: tables ${cos} do not match x ${x} (need [${L}, P] or [${B}, ${L}, P])`);
  if (2 * P > D || P < 1) throw new RangeError(`${op}: tables ${cos} rotate ${2 * P} dims but x ${x} has head dim ${D}`);
  const out = outputTensor(e, op, x.shape, x.dtype, opts.out, [x, cos, sin], true); // any offset: out_off
  const kernel = e.kernels.get({ shader: 'rope', dtype: x.dtype, constants: { INTERLEAVED: opts.style === 'interleaved', WG } });
  const params = new Params()
    .u32(x.numel)
    .u32(L)
    .u32(H)
    .u32(D)
    .u32(P)
    .u32(x4.offset)
    .u32(c3.offset)
    .u32(s3.offset)
    .dims(x4.strides, 4)
    .dims([tb === 1 ? 0 : c3.strides[0]!, c3.strides[1]!, c3.strides[2]!], 4)
    .u32(out.offset);
  e.recorder.dispatch({ kernel, bindings: [out, x, cos, sin], params, workgroups: grid1d(x.numel, WG) });
  return out;
}


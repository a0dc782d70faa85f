// Resampling of channels-last activations: nearest and (bi/tri)linear interpolation (PyTorch's F.interpolate).
//   shader:    shaders/resample.wgsl (entry interp; overrides MODE, ALIGN, WG)
//   reference: test/engine/reference/resample.ts
//   tests:     test/engine/resample.test.ts
// The anti-aliased 1D resamplers of BigVGAN are in ./resample_alias_free.ts.
// x is channels-last [N, L, C], [N, H, W, C] or [N, T, H, W, C], any strided view; the output is a new contiguous
// tensor unless `out` is given.
import type { Engine } from '../engine';
import { Params } from '../kernels';
import { grid1d } from '../recorder';
import { fmtShape, type Tensor } from '../tensor';
import { checkFloat, outputTensor } from './checks';

/** 'linear' / 'bilinear' / 'trilinear' are PyTorch's names for 1, 2 and 3 spatial axes; 'nearest' takes any. */
export type InterpMode = 'nearest' | 'linear' | 'bilinear' | 'trilinear';

export interface InterpolateOptions {
  mode: InterpMode;
  /** Output size per spatial axis (time/first axis first). Give this or `scale`. */
  size?: readonly number[];
  /** Integer up-scale factor (one for all axes, or one per axis): size = in * scale. */
  scale?: number | readonly number[];
  /** linear modes: PyTorch's align_corners (default false). */
  alignCorners?: boolean;
  out?: Tensor;
}

const WG = 256;
const LINEAR_RANK: Record<InterpMode, number | null> = { nearest: null, linear: 1, bilinear: 2, trilinear: 3 };

/**
 * F.interpolate on channels-last x. nearest: source = floor(o * in / out) in integer arithmetic (PyTorch's
 * formula for integer factors; for other sizes PyTorch multiplies by a float32 in/out and can land one row
 * lower at exact multiples). linear modes: PyTorch's source-coordinate formulas, with or without align_corners.
 */
export function interpolate(e: Engine, x: Tensor, o: InterpolateOptions): Tensor {
  const op = `interpolate(${o.mode})`;
  checkFloat(op, x);
  const d = x.rank - 2;
  if (d < 1 || d > 3) throw new RangeError(`${op}: x ${x} must be channels-last [N, L, C], [N, H, W, C] or [N, T, H, W, C]`);
  const lr = LINEAR_RANK[o.mode];
  if (lr === undefined) throw new RangeError(`${op}: unknown mode (nearest, linear, bilinear, trilinear)`);
  if (lr !== null && lr !== d) throw new RangeError(`${op}: x ${x} has ${d} spatial axes; ${o.mode} needs ${lr}`);
  if (o.alignCorners && lr === null) throw new RangeError(`${op}: alignCorners only applies to the linear modes`);
  const inSp = x.shape.slice(1, 1 + d);
  let size: number[];
  if (o.size && o.scale === undefined) size = [...o.size];
  else if (o.scale !== undefined && !o.size) {
    const s = typeof o.scale === 'number' ? Array<number>(d).fill(o.scale) : [...o.scale];
    if (s.length !== d || s.some((v) => !Number.isInteger(v) || v < 1)) throw new RangeError(`${op}: scale ${JSON.stringify(o.scale)} must be an integer >= 1 or ${d} of them`);
    size = inSp.map((n, i) => n * s[i]!);
  } else throw new RangeError(`${op}: give exactly one of size and scale`);
  if (size.length !== d || size.some((v) => !Number.isInteger(v) || v < 1)) throw new RangeError(`${op}: size ${JSON.stringify(o.size)} must be ${d} integers >= 1`);
  const C = x.shape[d + 1]!;
  const shape = [x.shape[0]!, ...size, C];
  const out = outputTensor(e, op, shape, x.dtype, o.out, [x], true); // any offset: in_sp.w
  if (out.numel === 0) return out;

  const to3 = (v: readonly number[], fill: number) => [...Array<number>(3 - d).fill(fill), ...v];
  const in3 = to3(inSp, 1);
  const out3 = to3(size, 1);
  const scale = in3.map((n, i) => (o.alignCorners ? (out3[i]! > 1 ? (n - 1) / (out3[i]! - 1) : 0) : n / out3[i]!));
  const params = new Params()
    .u32(out.numel).u32(C).u32(x.offset).u32(x.strides[0]!)
    .dims([...in3, out.offset], 4)
    .dims([...out3, out3[0]! * out3[1]! * out3[2]!], 4)
    .dims([...to3(x.strides.slice(1, 1 + d), 0), x.strides[d + 1]!], 4);
  for (const s of [...scale, 0]) params.f32(s);
  params.dims([], 4).f32(0); // fir, gain: unused here, but the uniform must cover the whole struct
  const kernel = e.kernels.get({ shader: 'resample', entry: 'interp', dtype: x.dtype, constants: { MODE: lr === null ? 0 : 1, ALIGN: !!o.alignCorners, WG } });
  e.recorder.dispatch({ kernel, bindings: [out, x], params, workgroups: grid1d(out.numel, WG) });
  return out;
}

/** Nearest-neighbour upsampling by integer factors (1D, 2D or 3D by x's rank). */
export function upsampleNearest(e: Engine, x: Tensor, scale: number | readonly number[], out?: Tensor): Tensor {
  return interpolate(e, x, { mode: 'nearest', scale, out });
}

/** Linear / bilinear / trilinear upsampling by integer factors (mode chosen from x's rank). */
export function upsampleLinear(e: Engine, x: Tensor, scale: number | readonly number[], alignCorners = false, out?: Tensor): Tensor {
  const mode = (['linear', 'bilinear', 'trilinear'] as const)[x.rank - 3];
  if (!mode) throw new RangeError(`upsampleLinear: x ${x} ${fmtShape(x.shape)} must have 1 to 3 spatial axes`);
  return interpolate(e, x, { mode, scale, alignCorners, out });
}

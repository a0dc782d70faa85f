// Convolutions as implicit GEMM over channels-last activations: conv1d/2d/3d and their transposed forms.
//   shader:    shaders/conv.wgsl (entries conv, the implicit GEMM, and depthwise; overrides WGX, WGY, BK, TRANSPOSED,
//              BIAS, WG)
//   reference: test/engine/reference/conv.ts
//   tests:     test/engine/conv1d.test.ts, conv2d3d.test.ts, conv_transposed.test.ts
//
// Layouts: x is channels-last ([N, L, C], [N, H, W, C], [N, T, H, W, C]), any strided view (transposes and
// slices are read in place). The output is a new contiguous channels-last tensor unless `out` is given.
// Weights: either the PyTorch checkpoint tensor as stored ([Cout, Cin/groups, k...]; transposed convs
// [Cin, Cout/groups, k...]), read in place, or the result of prepareConvWeight() ([groups, taps, Cin_g, Cout_g],
// made once at load) which the kernel reads coalesced. Both give the same numbers.
import type { Engine } from '../engine';
import { Params } from '../kernels';
import { grid1d } from '../recorder';
import { fmtShape, type Tensor } from '../tensor';
import { checkFloat, outputTensor } from './checks';
import { copy } from './layout';

export type PadMode = 'zeros' | 'replicate';
/** Per spatial axis: [front, back] padding. */
export type PadPair = readonly [number, number];

export interface ConvOptions {
  /** One value for every spatial axis, or one per axis (time/first axis first). Default 1. */
  stride?: number | readonly number[];
  /** Symmetric (number or one per axis), explicit [front, back] per axis, or 'same' (stride 1: total
   * dilation*(k-1) per axis, the odd one at the back as PyTorch does). Default 0. */
  padding?: number | readonly number[] | readonly PadPair[] | 'same';
  dilation?: number | readonly number[];
  groups?: number;
  /** [Cout], same dtype as x. */
  bias?: Tensor;
  /** The first spatial axis (time) is padded dilation*(k-1) in front and 0 behind, whatever `padding` says for
   * it (causal convs of audio codecs and video VAEs). */
  causal?: boolean;
  /** What padded positions read: 0, or the nearest edge element (one mode for all axes, or one per axis). Video
   * VAEs replicate the first frame for causal time padding: `padMode: ['replicate', 'zeros', 'zeros']`. */
  padMode?: PadMode | readonly PadMode[];
  out?: Tensor;
  /** Tuning (tests use small tiles to cross tile edges on small sizes). */
  tile?: ConvTile;
}

export interface ConvTransposeOptions {
  stride?: number | readonly number[];
  /** Removed from the full output: symmetric (number or per axis) or [front, back] per axis. Default 0. */
  padding?: number | readonly number[] | readonly PadPair[];
  /** Extra positions at the back of each axis (PyTorch's output_padding; < max(stride, dilation)). */
  outputPadding?: number | readonly number[];
  dilation?: number | readonly number[];
  groups?: number;
  bias?: Tensor;
  out?: Tensor;
  tile?: ConvTile;
}

export interface ConvTile { wgx?: number; wgy?: number; bk?: number }

/** A weight re-laid once for the kernel: [groups, taps, Cin_g, Cout_g] contiguous (see prepareConvWeight). */
export interface PreparedConvWeight {
  readonly prepared: true;
  readonly tensor: Tensor;
  /** The PyTorch shape it came from ([Cout, Cin_g, k...] or [Cin, Cout_g, k...] when transposed). */
  readonly torchShape: readonly number[];
  readonly groups: number;
  readonly transposed: boolean;
  free(): void;
}

export type ConvWeight = Tensor | PreparedConvWeight;

const AXES = ['', 'conv1d', 'conv2d', 'conv3d'] as const;

export const conv1d = (e: Engine, x: Tensor, w: ConvWeight, o: ConvOptions = {}) => conv(e, 1, x, w, o);
export const conv2d = (e: Engine, x: Tensor, w: ConvWeight, o: ConvOptions = {}) => conv(e, 2, x, w, o);
export const conv3d = (e: Engine, x: Tensor, w: ConvWeight, o: ConvOptions = {}) => conv(e, 3, x, w, o);
export const convTranspose1d = (e: Engine, x: Tensor, w: ConvWeight, o: ConvTransposeOptions = {}) => convTranspose(e, 1, x, w, o);
export const convTranspose2d = (e: Engine, x: Tensor, w: ConvWeight, o: ConvTransposeOptions = {}) => convTranspose(e, 2, x, w, o);
export const convTranspose3d = (e: Engine, x: Tensor, w: ConvWeight, o: ConvTransposeOptions = {}) => convTranspose(e, 3, x, w, o);

/**
 * Re-lays a PyTorch conv weight ([Cout, Cin_g, k...], or [Cin, Cout_g, k...] with `transposed`) as
 * [groups, taps, Cin_g, Cout_g] so the kernel's weight loads are contiguous. Call once at load; the source can
 * be freed afterwards. The result is only valid with the same `groups` and transposed-ness.
 */
export function prepareConvWeight(e: Engine, w: Tensor, opts: { groups?: number; transposed?: boolean } = {}): PreparedConvWeight {
  const groups = opts.groups ?? 1;
  const transposed = !!opts.transposed;
  const op = 'prepareConvWeight';
  checkFloat(op, w);
  if (w.rank < 3 || w.rank > 5) throw new RangeError(`${op}: w ${w} must be [out, in, k...] with 1 to 3 kernel dims`);
  if (!Number.isInteger(groups) || groups < 1) throw new RangeError(`${op}: groups ${groups} must be a positive integer`);
  const [a, b] = w.shape as [number, number];
  if (a % groups) throw new RangeError(`${op}: w ${w}: dim 0 (${a}) is not divisible by groups ${groups}`);
  const taps = w.shape.slice(2).reduce((s, n) => s * n, 1);
  // Split dim 0 into (groups, a/groups), merge the kernel dims, then order as [g, tap, ci, co].
  const src = w.isContiguous ? w : copy(e, w);
  const v = src.reshape([groups, a / groups, b, taps]);
  const view = transposed ? v.permute([0, 3, 1, 2]) : v.permute([0, 3, 2, 1]);
  const tensor = copy(e, view);
  if (src !== w) src.free();
  return { prepared: true, tensor, torchShape: [...w.shape], groups, transposed, free: () => tensor.free() };
}

interface Geometry {
  d: number;
  /** Per spatial axis, in the caller's order. */
  inSp: number[]; outSp: number[]; k: number[]; stride: number[]; dil: number[]; padFront: number[];
  repl: number;
}

function conv(e: Engine, d: 1 | 2 | 3, x: Tensor, w: ConvWeight, o: ConvOptions): Tensor {
  const op = AXES[d];
  const groups = o.groups ?? 1;
  const { cin, cout, cinG, coutG, k, wt } = weightInfo(op, d, x, w, groups, false);
  const inSp = x.shape.slice(1, 1 + d);
  const stride = perAxis(op, 'stride', o.stride ?? 1, d, 1);
  const dil = perAxis(op, 'dilation', o.dilation ?? 1, d, 1);
  let pads: [number, number][];
  if (o.padding === 'same') {
    if (stride.some((s) => s !== 1)) throw new RangeError(`${op}: padding 'same' needs stride 1 (got ${fmtShape(stride)})`);
    pads = k.map((kk, i) => { const t = dil[i]! * (kk - 1); return [Math.floor(t / 2), t - Math.floor(t / 2)]; });
  } else pads = padPairs(op, o.padding ?? 0, d);
  if (o.causal) pads[0] = [dil[0]! * (k[0]! - 1), 0];
  const modes = typeof o.padMode === 'string' || o.padMode === undefined ? Array<PadMode>(d).fill(o.padMode ?? 'zeros') : [...o.padMode];
  if (modes.length !== d || modes.some((m) => m !== 'zeros' && m !== 'replicate')) {
    throw new RangeError(`${op}: padMode ${JSON.stringify(o.padMode)} must be 'zeros' | 'replicate' or one per axis (${d})`);
  }
  const outSp = inSp.map((n, i) => Math.floor((n + pads[i]![0] + pads[i]![1] - dil[i]! * (k[i]! - 1) - 1) / stride[i]!) + 1);
  if (outSp.some((n) => n < 1)) {
    throw new RangeError(`${op}: x ${x} with kernel ${fmtShape(k)}, padding ${JSON.stringify(pads)}, dilation ${fmtShape(dil)}: empty output ${fmtShape(outSp)}`);
  }
  const repl = modes.reduce((m, mode, i) => (mode === 'replicate' ? m | (1 << (i + 3 - d)) : m), 0);
  const geo: Geometry = { d, inSp, outSp, k, stride, dil, padFront: pads.map((p) => p[0]), repl };
  return dispatch(e, op, false, x, wt, o.bias, { cin, cout, cinG, coutG, groups }, geo, o.out, o.tile);
}

function convTranspose(e: Engine, d: 1 | 2 | 3, x: Tensor, w: ConvWeight, o: ConvTransposeOptions): Tensor {
  const op = `convTranspose${d}d`;
  const groups = o.groups ?? 1;
  const { cin, cout, cinG, coutG, k, wt } = weightInfo(op, d, x, w, groups, true);
  const inSp = x.shape.slice(1, 1 + d);
  const stride = perAxis(op, 'stride', o.stride ?? 1, d, 1);
  const dil = perAxis(op, 'dilation', o.dilation ?? 1, d, 1);
  const opad = perAxis(op, 'outputPadding', o.outputPadding ?? 0, d, 0);
  const pads = padPairs(op, o.padding ?? 0, d);
  opad.forEach((p, i) => {
    if (p >= Math.max(stride[i]!, dil[i]!)) throw new RangeError(`${op}: outputPadding ${p} must be < max(stride ${stride[i]}, dilation ${dil[i]}) (axis ${i})`);
  });
  const outSp = inSp.map((n, i) => (n - 1) * stride[i]! - pads[i]![0] - pads[i]![1] + dil[i]! * (k[i]! - 1) + opad[i]! + 1);
  if (outSp.some((n) => n < 1)) throw new RangeError(`${op}: x ${x} with kernel ${fmtShape(k)}, padding ${JSON.stringify(pads)}: empty output ${fmtShape(outSp)}`);
  const geo: Geometry = { d, inSp, outSp, k, stride, dil, padFront: pads.map((p) => p[0]), repl: 0 };
  return dispatch(e, op, true, x, wt, o.bias, { cin, cout, cinG, coutG, groups }, geo, o.out, o.tile);
}

interface Channels { cin: number; cout: number; cinG: number; coutG: number; groups: number }

/** Checks x and w; returns channel counts, kernel sizes and the weight strides [group, co, ci, tap]. */
function weightInfo(op: string, d: number, x: Tensor, w: ConvWeight, groups: number, transposed: boolean) {
  checkFloat(op, x);
  const names = d === 1 ? '[N, L, C]' : d === 2 ? '[N, H, W, C]' : '[N, T, H, W, C]';
  if (x.rank !== d + 2) throw new RangeError(`${op}: x ${x} must be channels-last ${names}`);
  if (!Number.isInteger(groups) || groups < 1) throw new RangeError(`${op}: groups ${groups} must be a positive integer`);
  const wShape = 'prepared' in w ? w.torchShape : w.shape;
  const wTensor = 'prepared' in w ? w.tensor : w;
  const wName = `w ${wTensor.dtype}${fmtShape(wShape)}`;
  if (wTensor.dtype !== x.dtype) throw new TypeError(`${op}: x ${x} vs ${wName}: dtypes differ`);
  const layout = transposed ? '[Cin, Cout/groups, k...]' : '[Cout, Cin/groups, k...]';
  if (wShape.length !== d + 2) throw new RangeError(`${op}: ${wName} must be ${layout} with ${d} kernel dims`);
  if ('prepared' in w && (w.groups !== groups || w.transposed !== transposed)) {
    throw new RangeError(`${op}: ${wName} was prepared for groups ${w.groups}${w.transposed ? ', transposed' : ''}; this call has groups ${groups}${transposed ? ', transposed' : ''}`);
  }
  const cin = x.shape[d + 1]!;
  const k = wShape.slice(2);
  const taps = k.reduce((s, n) => s * n, 1);
  if (cin % groups) throw new RangeError(`${op}: x ${x}: ${cin} input channels not divisible by groups ${groups}`);
  const cinG = cin / groups;
  let cout: number;
  let coutG: number;
  if (transposed) {
    if (wShape[0] !== cin) throw new RangeError(`${op}: x ${x} has ${cin} channels but ${wName} (${layout}) expects ${wShape[0]}`);
    coutG = wShape[1]!;
    cout = coutG * groups;
  } else {
    if (wShape[1] !== cinG) throw new RangeError(`${op}: x ${x} with groups ${groups} has ${cinG} channels per group but ${wName} (${layout}) expects ${wShape[1]}`);
    cout = wShape[0]!;
    if (cout % groups) throw new RangeError(`${op}: ${wName}: ${cout} output channels not divisible by groups ${groups}`);
    coutG = cout / groups;
  }
  let wt: { t: Tensor; str: number[] };
  if ('prepared' in w) {
    wt = { t: w.tensor, str: [taps * cinG * coutG, 1, coutG, cinG * coutG] };
  } else {
    const s = w.strides;
    const tapStride = flatTapStride(op, wName, w, d);
    wt = transposed
      ? { t: w, str: [cinG * s[0]!, s[1]!, s[0]!, tapStride] }
      : { t: w, str: [coutG * s[0]!, s[0]!, s[1]!, tapStride] };
  }
  return { cin, cout, cinG, coutG, k, wt };
}

/** The stride of the flat tap index (kt*kH*kW + kh*kW + kw): that of the innermost kernel dim longer than 1,
 * provided the kernel dims are row-major among themselves (size-1 dims may have any stride). */
function flatTapStride(op: string, wName: string, w: Tensor, d: number): number {
  let tap = 0;
  let expected = -1;
  for (let i = d + 1; i >= 2; i--) {
    if (w.shape[i] === 1) continue;
    if (expected < 0) tap = w.strides[i]!;
    else if (w.strides[i] !== expected) {
      throw new RangeError(`${op}: ${wName}: kernel dims must be row-major among themselves (strides ${fmtShape(w.strides)}); copy() it`);
    }
    expected = w.strides[i]! * w.shape[i]!;
  }
  return tap;
}

function dispatch(e: Engine, op: string, transposed: boolean, x: Tensor, wt: { t: Tensor; str: number[] }, bias: Tensor | undefined,
  ch: Channels, geo: Geometry, outOpt: Tensor | undefined, tile: ConvTile | undefined): Tensor {
  if (bias && (bias.dtype !== x.dtype || bias.rank !== 1 || bias.shape[0] !== ch.cout)) {
    throw new RangeError(`${op}: bias ${bias} must be ${x.dtype}[${ch.cout}]`);
  }
  const n = x.shape[0]!;
  const shape = [n, ...geo.outSp, ch.cout];
  const out = outputTensor(e, op, shape, x.dtype, outOpt, [x, wt.t, bias], true); // any offset: in_sp.w
  // Right-align the caller's axes into the kernel's (T, H, W); missing axes have size 1.
  const to3 = (v: readonly number[], fill: number) => [...Array<number>(3 - geo.d).fill(fill), ...v];
  const inSp = to3(geo.inSp, 1);
  const outSp = to3(geo.outSp, 1);
  const k = to3(geo.k, 1);
  const xs = to3(x.strides.slice(1, 1 + geo.d), 0);
  const M = n * outSp[0]! * outSp[1]! * outSp[2]!;
  const K = ch.cinG * k[0]! * k[1]! * k[2]!;
  if (M >= 2 ** 31 || x.storage.byteLength / x.bytesPerElement >= 2 ** 31) throw new RangeError(`${op}: x ${x} or its output is too large (2^31 elements)`);

  // Depthwise (one input and one output channel per group): a direct kernel, one thread per output element;
  // the GEMM tiling would leave 3/4 of each tile idle. `tile` forces the GEMM path (tests cover both).
  if (!transposed && ch.cinG === 1 && ch.coutG === 1 && !tile) {
    const params = convParams(M, K, ch, 1, x, wt, bias, geo, inSp, outSp, k, xs, out);
    const kernel = e.kernels.get({ shader: 'conv', entry: 'depthwise', dtype: x.dtype, constants: { WG: DW_WG, BIAS: !!bias } });
    e.recorder.dispatch({ kernel, bindings: [out, x, wt.t, bias ?? x], params, workgroups: grid1d(out.numel, DW_WG), flops: 2 * M * K * ch.cout, rate: 'conv' });
    return out;
  }
  const { wgx, wgy, bk } = pickTile(ch.coutG, K, tile);
  const colTiles = Math.ceil(ch.coutG / (4 * wgx));
  const rowTiles = Math.ceil(M / (4 * wgy));
  const maxWg = e.gpu.device.limits.maxComputeWorkgroupsPerDimension;
  if (colTiles * ch.groups > maxWg) throw new RangeError(`${op}: ${ch.groups} groups x ${colTiles} channel tiles > ${maxWg} workgroups`);
  const gy = Math.min(rowTiles, maxWg);
  const gz = Math.ceil(rowTiles / gy);

  const params = convParams(M, K, ch, colTiles, x, wt, bias, geo, inSp, outSp, k, xs, out);
  const kernel = e.kernels.get({ shader: 'conv', entry: 'conv', dtype: x.dtype, constants: { WGX: wgx, WGY: wgy, BK: bk, TRANSPOSED: transposed, BIAS: !!bias } });
  // every (output position, input channel of its group, tap) pair: 2 M K Cout (a transposed conv's taps included)
  e.recorder.dispatch({ kernel, bindings: [out, x, wt.t, bias ?? x], params, workgroups: [colTiles * ch.groups, gy, gz], flops: 2 * M * K * ch.cout, rate: 'conv' });
  return out;
}

const DW_WG = 256;

/** The Params uniform of shaders/conv.wgsl (both entries), in struct order; spatial vectors already in (T, H, W). */
function convParams(M: number, K: number, ch: Channels, colTiles: number, x: Tensor, wt: { t: Tensor; str: number[] }, bias: Tensor | undefined,
  geo: Geometry, inSp: number[], outSp: number[], k: number[], xs: number[], out: Tensor): Params {
  const to3 = (v: readonly number[], fill: number) => [...Array<number>(3 - geo.d).fill(fill), ...v];
  return new Params()
    .u32(M).u32(K).u32(ch.cinG).u32(ch.coutG)
    .u32(ch.cout).u32(colTiles).u32(x.offset).u32(wt.t.offset)
    .u32(bias?.offset ?? 0).u32(bias?.strides[0] ?? 0).u32(geo.repl).u32(x.strides[0]!)
    .dims([...inSp, out.offset], 4)
    .dims([...outSp, outSp[0]! * outSp[1]! * outSp[2]!], 4)
    .dims([...k, k[1]! * k[2]!], 4)
    .dims(to3(geo.stride, 1), 4)
    .dims(to3(geo.dil, 1), 4)
    .dims(to3(geo.padFront, 0), 4)
    .dims([...xs, x.strides[geo.d + 1]!], 4)
    .dims(wt.str, 4);
}

/** Tile shape for Cout_g channels and K = Cin_g*taps: narrow tiles for depthwise/few channels, shallow K slices for
 * short reductions (workgroup memory stays under 16 KiB: (BK*WGY + BK*WGX + 4*WGY) * 16 bytes). */
function pickTile(coutG: number, K: number, t: ConvTile | undefined): { wgx: number; wgy: number; bk: number } {
  let wgx = 16;
  while (wgx > 1 && 4 * (wgx / 2) >= coutG) wgx /= 2;
  const wgy = Math.min(32, 256 / wgx);
  let bk = 16;
  while (bk > 4 && bk / 2 >= K) bk /= 2;
  return { wgx: t?.wgx ?? wgx, wgy: t?.wgy ?? wgy, bk: t?.bk ?? bk };
}

function perAxis(op: string, name: string, v: number | readonly number[], d: number, min: number): number[] {
  const arr = typeof v === 'number' ? Array<number>(d).fill(v) : [...v];
  if (arr.length !== d || arr.some((n) => !Number.isInteger(n) || n < min)) {
    throw new RangeError(`${op}: ${name} ${JSON.stringify(v)} must be an integer >= ${min} or ${d} of them`);
  }
  return arr;
}

function padPairs(op: string, v: number | readonly number[] | readonly PadPair[], d: number): [number, number][] {
  const bad = () => new RangeError(`${op}: padding ${JSON.stringify(v)} must be a number, ${d} numbers or ${d} [front, back] pairs (integers >= 0)`);
  let pairs: [number, number][];
  if (typeof v === 'number') pairs = Array.from({ length: d }, () => [v, v]);
  else if (v.length !== d) throw bad();
  else pairs = (v as readonly (number | PadPair)[]).map((p) => (typeof p === 'number' ? [p, p] : [p[0], p[1]]));
  if (pairs.some((p) => p.length !== 2 || p.some((n) => !Number.isInteger(n) || n < 0))) throw bad();
  return pairs;
}

// Normalisation ops: LayerNorm / RMSNorm over the last dim with fused affine, AdaLN modulation and gated
// residual; per-head RMSNorm (QK-norm); GroupNorm on channels-last data with fused SiLU.
//   shader:    shaders/norm.wgsl (entries rows, gn_stats, gn_apply)
//   reference: test/engine/reference/norm.ts
//   tests:     test/engine/norm.test.ts
// Inputs may be strided views; outputs are new contiguous tensors unless `out` is given.
import type { Engine } from '../engine';
import { Params } from '../kernels';
import { grid1d } from '../recorder';
import { fmtShape, numelOf, type Tensor } from '../tensor';
import { checkFloat, outputTensor, sameShape } from './checks';

const MAX_LEAD = 4; // leading dims of a row norm's x (so x has rank <= 5)
const MAX_SEG = 8;

export interface RowNormOptions {
  /** Added to the variance (default 1e-5 for LayerNorm, 1e-6 for RMSNorm). */
  eps?: number;
  /** Affine weight [D] (any 1D view). */
  weight?: Tensor;
  /** Affine bias [D] (LayerNorm only). */
  bias?: Tensor;
  /**
   * AdaLN modulation: y = y * (scaleOffset + scale) + shift. Shape [...lead[:-1], S, D] or anything that
   * broadcasts to it, where S = segments.length: e.g. x [B, L, D] with scale [B, 1, D] (per batch) or
   * [S, D] with segments [textLen, videoLen] (per modality). Views (chunks of one projection) are fine.
   */
  scale?: Tensor;
  shift?: Tensor;
  /** Default 1 (the `1 + scale` form). */
  scaleOffset?: number;
  /** Lengths of consecutive row segments along the last leading dim (sum = that dim); default one segment. */
  segments?: readonly number[];
  /** out = residual + gate * y; gate has the modulation's shape, residual has x's shape. */
  gate?: Tensor;
  residual?: Tensor;
  out?: Tensor;
}

/** LayerNorm over the last dim of x [...lead, D] (lead rank <= 4), statistics in f32. */
export function layerNorm(e: Engine, x: Tensor, opts: RowNormOptions = {}): Tensor {
  return rowNorm(e, 'layerNorm', false, x, opts);
}

/** RMSNorm over the last dim: y = x / sqrt(mean(x^2) + eps) [* weight], plus the same fusions as layerNorm. */
export function rmsNorm(e: Engine, x: Tensor, opts: Omit<RowNormOptions, 'bias'> = {}): Tensor {
  return rowNorm(e, 'rmsNorm', true, x, opts);
}

/** QK-norm: RMSNorm of each head's D slice of x [..., H, D] (any view), weight [D] shared by the heads. */
export function headRmsNorm(e: Engine, x: Tensor, weight: Tensor | undefined, eps = 1e-6, out?: Tensor): Tensor {
  if (x.rank < 2) throw new RangeError(`headRmsNorm: x ${x} must be [..., H, D]`);
  return rowNorm(e, 'headRmsNorm', true, x, { weight, eps, out });
}

function rowNorm(e: Engine, op: string, rms: boolean, x: Tensor, o: RowNormOptions): Tensor {
  checkFloat(op, x);
  if (x.rank < 1 || x.rank > MAX_LEAD + 1) throw new RangeError(`${op}: x ${x} must have rank 1..${MAX_LEAD + 1}`);
  const d = x.shape[x.rank - 1]!;
  const lead = x.shape.slice(0, -1);
  if (d === 0 || numelOf(lead) === 0) throw new RangeError(`${op}: x ${x} is empty`);
  const rows = numelOf(lead);
  const vec = (name: string, t: Tensor | undefined): Tensor | undefined => {
    if (!t) return undefined;
    checkSame(op, name, x, t);
    if (t.rank !== 1 || t.shape[0] !== d) throw new RangeError(`${op}: ${name} ${t} must be [${d}] for x ${x}`);
    return t;
  };
  const w = vec('weight', o.weight);
  const b = vec('bias', o.bias);

  const segs = o.segments ?? (lead.length ? [lead[lead.length - 1]!] : [1]);
  if (segs.length < 1 || segs.length > MAX_SEG) throw new RangeError(`${op}: ${segs.length} segments (1..${MAX_SEG})`);
  if (o.segments && (lead.length === 0 || segs.reduce((a, s) => a + s, 0) !== lead[lead.length - 1] || segs.some((s) => !Number.isInteger(s) || s < 0))) {
    throw new RangeError(`${op}: segments [${segs}] must be lengths summing to dim ${lead.length - 1} of x ${x}`);
  }
  // Modulation target shape: [...lead[:-1], S, D]; strides returned for the lead part (segment last).
  const modShape = lead.length ? [...lead.slice(0, -1), segs.length, d] : [d];
  const mod = (name: string, t: Tensor | undefined): { t: Tensor; lead: number[]; ds: number } | undefined => {
    if (!t) return undefined;
    checkSame(op, name, x, t);
    let v: Tensor;
    try {
      v = t.expand(modShape);
    } catch {
      throw new RangeError(`${op}: ${name} ${t} does not broadcast to ${fmtShape(modShape)} (x ${x}, ${segs.length} segments)`);
    }
    return { t: v, lead: v.strides.slice(0, -1) as number[], ds: v.strides[v.rank - 1]! };
  };
  const sc = mod('scale', o.scale);
  const sh = mod('shift', o.shift);
  const g = mod('gate', o.gate);
  let res: Tensor | undefined;
  if (o.residual) {
    checkSame(op, 'residual', x, o.residual);
    if (!sameShape(o.residual.shape, x.shape)) throw new RangeError(`${op}: residual ${o.residual} vs x ${x}: shapes differ`);
    res = o.residual;
  }

  const out = outputTensor(e, op, x.shape, x.dtype, o.out, [x, w, b, sc?.t, sh?.t, g?.t, res], true); // any offset: offs[7]
  const wg = d <= 128 ? 64 : d <= 1024 ? 128 : 256;
  const kernel = e.kernels.get({
    shader: 'norm',
    entry: 'rows',
    dtype: x.dtype,
    constants: { RMS: rms, HAS_W: !!w, HAS_B: !!b, HAS_SCALE: !!sc, HAS_SHIFT: !!sh, HAS_RES: !!res, HAS_GATE: !!g, WG: wg },
  });
  const ends: number[] = [];
  segs.reduce((a, s) => (ends.push(a + s), a + s), 0);
  const pad1 = (v: readonly number[]) => [...v, 1, 1, 1, 1].slice(0, 4);
  const params = new Params()
    .u32(rows)
    .u32(d)
    .u32(lead.length)
    .u32(segs.length)
    .f32(o.eps ?? (rms ? 1e-6 : 1e-5))
    .f32(o.scaleOffset ?? 1)
    .dims([x.offset, res?.offset ?? 0, w?.offset ?? 0, b?.offset ?? 0, sc?.t.offset ?? 0, sh?.t.offset ?? 0, g?.t.offset ?? 0, out.offset], 8)
    .dims([x.strides[x.rank - 1]!, res?.strides[x.rank - 1] ?? 0, w?.strides[0] ?? 0, b?.strides[0] ?? 0, sc?.ds ?? 0, sh?.ds ?? 0, g?.ds ?? 0], 8)
    .dims(pad1(lead), 4)
    .dims(x.strides.slice(0, -1), 4)
    .dims(res?.strides.slice(0, -1) ?? [], 4)
    .dims(sc?.lead ?? [], 4)
    .dims(sh?.lead ?? [], 4)
    .dims(g?.lead ?? [], 4)
    .dims(ends, 8);
  e.recorder.dispatch({
    kernel,
    bindings: [out, x, res ?? x, w ?? x, b ?? x, sc?.t ?? x, sh?.t ?? x, g?.t ?? x],
    params,
    workgroups: grid2d(rows),
  });
  return out;
}

export interface GroupNormOptions {
  eps?: number;
  /** Per-channel affine [C]. */
  weight?: Tensor;
  bias?: Tensor;
  /** Fused y = silu(y) after the affine (the VAE's norm + activation pair). */
  silu?: boolean;
  out?: Tensor;
}

/** GroupNorm of channels-last x [B, ...spatial, C] (rank 2..8, any view): statistics per (batch, group). */
export function groupNorm(e: Engine, x: Tensor, groups: number, o: GroupNormOptions = {}): Tensor {
  const op = 'groupNorm';
  checkFloat(op, x);
  if (x.rank < 2 || x.rank > 8) throw new RangeError(`${op}: x ${x} must be [B, ...spatial, C] with rank 2..8`);
  const c = x.shape[x.rank - 1]!;
  const bsz = x.shape[0]!;
  if (!Number.isInteger(groups) || groups < 1 || c % groups !== 0) throw new RangeError(`${op}: ${c} channels of x ${x} do not split into ${groups} groups`);
  const spatial = numelOf(x.shape.slice(1, -1));
  if (x.numel === 0) throw new RangeError(`${op}: x ${x} is empty`);
  for (const [name, t] of [['weight', o.weight], ['bias', o.bias]] as const) {
    if (!t) continue;
    checkSame(op, name, x, t);
    if (t.rank !== 1 || t.shape[0] !== c) throw new RangeError(`${op}: ${name} ${t} must be [${c}] for x ${x}`);
  }
  const out = outputTensor(e, op, x.shape, x.dtype, o.out, [x, o.weight, o.bias], true); // any offset: out_off
  const stats = e.empty([bsz * groups, 2], 'f32', 'groupNorm stats');
  const params = new Params()
    .u32(x.numel)
    .u32(c)
    .u32(groups)
    .u32(c / groups)
    .u32(spatial)
    .u32(x.rank)
    .f32(o.eps ?? 1e-5)
    .u32(o.bias?.strides[0] ?? 0)
    .dims([x.offset, o.weight?.offset ?? 0, o.bias?.offset ?? 0, o.weight?.strides[0] ?? 0], 4)
    .dims(x.shape, 8)
    .dims(x.strides, 8)
    .u32(out.offset);
  const WG = 256;
  const constants = { HAS_W: !!o.weight, HAS_B: !!o.bias, SILU: !!o.silu, WG };
  const statsKernel = e.kernels.get({ shader: 'norm', entry: 'gn_stats', dtype: x.dtype, constants: { WG } });
  e.recorder.dispatch({ kernel: statsKernel, bindings: [stats, x], params, workgroups: [bsz * groups] });
  const apply = e.kernels.get({ shader: 'norm', entry: 'gn_apply', dtype: x.dtype, constants });
  e.recorder.dispatch({
    kernel: apply,
    bindings: [out, x, stats, o.weight ?? x, o.bias ?? x],
    params,
    workgroups: grid1d(x.numel, WG),
  });
  stats.free(); // safe: later users of the pooled buffer are ordered after these dispatches on the queue
  return out;
}

/** One workgroup per row; rows past 65535 fold into y. */
function grid2d(n: number): [number, number] {
  const max = 65535;
  return n <= max ? [n, 1] : [max, Math.ceil(n / max)];
}

function checkSame(op: string, name: string, x: Tensor, t: Tensor): void {
  if (t.dtype !== x.dtype) throw new TypeError(`${op}: ${name} ${t} vs x ${x}: dtypes differ`);
}


// Batched matmul with a fused epilogue (bias, activation, gate, residual) and int8 weight-only B.
//   shader:    shaders/matmul.wgsl (entry matmul; overrides WGX, WGY, BK, BTYPE, STYPE, ACT, BIAS, GATE, RESID)
//              shaders/gemv.wgsl (ops/gemv.ts: 1 row, or up to 8 when asked, against a linear weight W (N, K): decode)
//              shaders/matmul_subgroup.wgsl (tensor-core path: f16 activations, f16 or int8 weights, where the
//              adapter has subgroup matrix; opt-in with KILN_SUBGROUP_MATRIX=1 until it has been timed on hardware)
//   reference: test/engine/reference/matmul.ts
//   tests:     test/engine/matmul.test.ts, test/engine/linear.test.ts, test/engine/int8.test.ts
// A and B may be any strided views (a transposed operand is a transpose() view, no copy); batch dims (up to
// 3) broadcast like numpy. The output is a new contiguous tensor unless `out` is given: any contiguous view of the
// output's shape and dtype, at any element offset (the kernels add out.offset: Params offs2.w, gemv's w.z).
import type { Engine } from '../engine';
import { Params } from '../kernels';
import { gemmRate, gemmShape } from '../meter';
import { broadcastShapes, fmtShape, type Tensor } from '../tensor';
import { gemmSubgroup, subgroupMatrixUsable, type SubgroupOptions } from './matmul_subgroup';
import { gemv, gemvRefusal } from './gemv';
import { outputTensor } from './checks';

export type Activation = 'none' | 'gelu_tanh' | 'gelu_erf' | 'silu';
export const ACT_CODE: Record<Activation, number> = { none: 0, gelu_tanh: 1, gelu_erf: 2, silu: 3 };

/** y = act(A·B * scale + bias); y *= gate; y += residual (each step only if given). */
export interface Epilogue {
  /** [N], the output's last dim (any stride). */
  bias?: Tensor;
  act?: Activation;
  /** Broadcastable to the output shape (e.g. [B, 1, N] adaLN gates, or [B, L, N] for GLU-style gating). */
  gate?: Tensor;
  /** Broadcastable to the output shape; added last (out = residual + gate * (xW + b)). */
  residual?: Tensor;
}

export interface GemmOptions extends Epilogue {
  /** Per-output-channel scales [N] (f32 or f16), required when B is i8. */
  scales?: Tensor;
  out?: Tensor;
  /** Tuning of the tiled kernel (tests use small tiles to cross tile edges on small sizes); setting it also skips the GEMV. */
  tile?: { wgx?: number; wgy?: number; bk?: number };
  /** 'auto' is the register-tiled kernel, or the subgroup-matrix kernel when KILN_SUBGROUP_MATRIX=1 is set and the
   * adapter has it (opt-in: that path has not been timed on real hardware), or the GEMV for 1 row against a linear weight;
   * 'tiled' / 'subgroup' / 'gemv' force one ('gemv': up to 8 rows, B a linear weight's transpose view). */
  path?: 'auto' | 'tiled' | 'subgroup' | 'gemv';
  /** The subgroup-matrix kernel's tile (default KILN_SUBGROUP_TILE, else '128'), and `emulate` for tests. */
  subgroup?: SubgroupOptions;
}

const MAX_BATCH = 3;

/** C = A·B: a (batch..., M, K), b (batch..., K, N) -> (batch..., M, N). */
export function matmul(e: Engine, a: Tensor, b: Tensor, opts: GemmOptions = {}): Tensor {
  return gemm(e, 'matmul', a, b, opts);
}

/** Shared by matmul and linear: checks, then dispatches the tiled or subgroup-matrix kernel. */
export function gemm(e: Engine, op: string, a: Tensor, b: Tensor, opts: GemmOptions): Tensor {
  if (a.dtype !== 'f32' && a.dtype !== 'f16') throw new TypeError(`${op}: a ${a}: only f32 and f16 activations`);
  if (b.dtype === 'i8') {
    if (!opts.scales) throw new TypeError(`${op}: int8 weight ${b} needs per-channel scales`);
  } else if (b.dtype !== a.dtype) throw new TypeError(`${op}: a ${a} vs b ${b}: dtypes differ`);
  else if (opts.scales) throw new TypeError(`${op}: scales ${opts.scales} given for ${b}: they dequantise an int8 weight only`);
  if (a.rank < 2 || b.rank < 2) throw new RangeError(`${op}: a${fmtShape(a.shape)} and b${fmtShape(b.shape)} need rank >= 2`);
  const [M, K] = a.shape.slice(-2) as [number, number];
  const [Kb, N] = b.shape.slice(-2) as [number, number];
  if (K !== Kb) throw new RangeError(`${op}: a${fmtShape(a.shape)} · b${fmtShape(b.shape)}: inner dims ${K} vs ${Kb}`);
  if (M === 0 || N === 0 || K === 0) throw new RangeError(`${op}: a${fmtShape(a.shape)} · b${fmtShape(b.shape)}: empty dims`);
  const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2));
  if (!batch) throw new RangeError(`${op}: a${fmtShape(a.shape)} · b${fmtShape(b.shape)}: batch dims do not broadcast`);
  if (batch.length > MAX_BATCH) throw new RangeError(`${op}: ${batch.length} batch dims ${fmtShape(batch)} > ${MAX_BATCH}`);
  const shape = [...batch, M, N];
  const nb = batch.reduce((x, y) => x * y, 1);
  if (nb > 65535) throw new RangeError(`${op}: ${nb} batches > 65535`);

  const { bias, gate, residual, scales } = opts;
  if (bias && (bias.rank !== 1 || bias.shape[0] !== N || bias.dtype !== a.dtype)) {
    throw new RangeError(`${op}: bias ${bias} must be ${a.dtype}[${N}]`);
  }
  if (scales && (scales.rank !== 1 || scales.shape[0] !== N || scales.dtype === 'i8')) {
    throw new RangeError(`${op}: scales ${scales} must be f32[${N}] or f16[${N}]`);
  }
  const aux = (name: string, t: Tensor | undefined): Tensor | undefined => {
    if (!t) return undefined;
    if (t.dtype !== a.dtype) throw new TypeError(`${op}: ${name} ${t} vs a ${a}: dtypes differ`);
    const s = broadcastShapes(t.shape, shape);
    if (!s || s.length !== shape.length || s.some((n, i) => n !== shape[i])) {
      throw new RangeError(`${op}: ${name}${fmtShape(t.shape)} does not broadcast to the output ${fmtShape(shape)}`);
    }
    return t.expand(shape);
  };
  const g = aux('gate', gate);
  const r = aux('residual', residual);

  // out may be a contiguous view at any element offset (e.g. rows of a bigger tensor): every kernel adds it.
  const out = outputTensor(e, op, shape, a.dtype, opts.out, [a, b, bias, gate, residual, scales], true);

  const ae = a.expand([...batch, M, K]);
  const be = b.expand([...batch, K, N]);
  const bstr = (t: Tensor | undefined) => pad3(t ? t.strides.slice(0, -2) : []);
  const mat = (t: Tensor | undefined) => (t ? [t.strides[t.rank - 2]!, t.strides[t.rank - 1]!] : [0, 0]);
  const params = new Params()
    .u32(M).u32(N).u32(K).u32(bias ? bias.strides[0]! : 0)
    .dims(pad3(batch, 1), 4)
    .dims([a.offset, b.offset, bias?.offset ?? 0, scales?.offset ?? 0], 4)
    .dims([g?.offset ?? 0, r?.offset ?? 0, scales?.strides[0] ?? 0, out.offset], 4)
    .dims(bstr(ae), 4).dims(mat(ae), 4)
    .dims(bstr(be), 4).dims(mat(be), 4)
    .dims(bstr(g), 4).dims(mat(g), 4)
    .dims(bstr(r), 4).dims(mat(r), 4);

  const path = opts.path ?? 'auto';
  // One row against a linear weight (decode): the GEMV reads W once instead of computing a 64-row tile. 'auto' takes
  // it for 1 row only (see ops/gemv.ts: the sum order differs from the tiled kernel's); 'gemv' forces it (<= 8 rows).
  const refusal = path === 'gemv' || (path === 'auto' && !opts.tile && nb * M === 1) ? gemvRefusal(nb * M, be) : 'not asked';
  if (path === 'gemv' && refusal) throw new RangeError(`${op}: path 'gemv': ${refusal}`);
  if (!refusal) {
    gemv(e, { a: ae, b: be, out, M, N, K, batch, bias, gate: g, residual: r, scales, act: opts.act ?? 'none' });
    return out;
  }
  const tensorCoreTypes = a.dtype === 'f16' && (b.dtype === 'f16' || b.dtype === 'i8');
  // 'auto': the tensor-core kernel under KILN_SUBGROUP_MATRIX=1, or where this adapter's tuning table (tuning.ts)
  // picks it for the shape's class, or, without a table, for medium and large outputs once the engine's tensor-core
  // self-test passed (tensor-cores.ts); never under KILN_SUBGROUP_MATRIX=0; its variant: the op's,
  // KILN_SUBGROUP_TILE, the table's
  const tuned = e.tuning.gemm(M, N, e.tensorCores.gemm);
  const wantSubgroup = e.settings.subgroupMatrix || (tuned.path === 'subgroup' && !e.settings.subgroupMatrixOff);
  if (path === 'subgroup' || (path === 'auto' && tensorCoreTypes && wantSubgroup && subgroupMatrixUsable(e, opts.subgroup?.emulate))) {
    const sub = { a: ae, b: be, out, params, M, N, K, batches: nb, bias, gate: g, residual: r, scales, act: opts.act ?? 'none' };
    const tile = opts.subgroup?.tile ?? e.settings.subgroupTile ?? (tuned.path === 'subgroup' ? tuned.variant : undefined);
    gemmSubgroup(e, op, sub, { ...opts.subgroup, tile: tile as SubgroupOptions['tile'] });
    return out;
  }
  const wgx = opts.tile?.wgx ?? 16;
  const wgy = opts.tile?.wgy ?? 16;
  const bk = opts.tile?.bk ?? 16;
  const kernel = e.kernels.get({
    shader: 'matmul',
    entry: 'matmul',
    dtype: a.dtype,
    constants: {
      WGX: wgx, WGY: wgy, BK: bk,
      BTYPE: b.dtype === 'f32' ? 0 : b.dtype === 'f16' ? 1 : 2,
      STYPE: scales?.dtype === 'f16' ? 1 : 0,
      ACT: ACT_CODE[opts.act ?? 'none'],
      BIAS: !!bias, GATE: !!g, RESID: !!r, SATURATE: a.dtype === 'f16',
    },
  });
  // Unused inputs are statically referenced by the shader, so something must be bound: `a` (read-only).
  e.recorder.dispatch({
    kernel,
    bindings: [out, a, b, bias ?? a, g ?? a, r ?? a, scales ?? a],
    params,
    workgroups: [Math.ceil(N / (4 * wgx)), Math.ceil(M / (4 * wgy)), nb],
    flops: 2 * nb * M * N * K,
    rate: gemmRate(M, N),
    shape: gemmShape(nb, M, K, N),
  });
  return out;
}

/** The last 3 values, padded at the front with `fill` (batch dims are matched from the right). */
function pad3(v: readonly number[], fill = 0): number[] {
  return [...Array<number>(MAX_BATCH - v.length).fill(fill), ...v];
}

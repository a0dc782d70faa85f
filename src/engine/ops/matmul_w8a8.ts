// W8A8 tensor-core GEMM (issue 43): y = act((q_x · q_w^T) * ascale[row] * wscale[n] + bias) * gate + residual, with
// x's rows quantised per token on the fly (ops/quantize_act.ts) and the int8 weight as the _int8 profiles hold it
// (per-output-channel scales, src/engine/quantize.ts). i8 x i8 -> i32 subgroup matrices: the generated
// double-buffered kernel of ops/matmul_subgroup_gen.ts with AQ set (same template, Params and epilogue as the f16
// and W8A16 tensor-core GEMMs), output f16.
//   reference: w8a8Ref (below): the reference's own quantisation, exact integer sums, then the scales
//   tests:     test/engine/matmul_w8a8.test.ts (native where the adapter has i8 matrices, emulated on lavapipe)
// Where it runs: adapters with chromium-experimental-subgroup-matrix offering an i8 x i8 -> i32 config (NVIDIA:
// 16x16x32 and 16x8x32) and one fixed subgroup size; K a multiple of 16 (16-int8 vector reads); x with unit inner
// stride; the weight (N, K) contiguous. Elsewhere w8a8Refusal says why, and linear() keeps W8A16.
import type { Engine } from '../engine';
import type { SubgroupMatrixConfig } from '../device';
import { Params } from '../kernels';
import { gemmRate, gemmShape } from '../meter';
import { broadcastShapes, fmtShape, type Tensor } from '../tensor';
import { ACT_CODE, type Epilogue } from './matmul';
import { SUBGROUP_MATRIX_FEATURE, vectorReads, type SubgroupTile } from './matmul_subgroup';
import { pipelinedGemmSource, pipelinedTileBytes } from './matmul_subgroup_gen';
import { emulateSubgroupMatrix } from './subgroup_matrix_emulation';
import { quantizeActivations, quantizeActRef } from './quantize_act';
import { outputTensor } from './checks';
import type { Int8Weight } from './linear';

/** Tiles (int8 staging: half the f16 bytes, so BK 64 at 128x128 fits 48 KiB: 44 KiB at 16x16 fragments). */
export const W8A8_TILES = {
  'w128': { sgm: 2, sgn: 2, fm: 4, fn: 4, bk: 64, pad: 16, stages: 2 },
  'w64': { sgm: 2, sgn: 2, fm: 2, fn: 2, bk: 64, pad: 16, stages: 2 },
} as const satisfies Record<string, SubgroupTile>;
export type W8A8TileName = keyof typeof W8A8_TILES;

export interface W8A8Options {
  /** A preset or an explicit tile; default the largest preset the adapter's workgroup memory holds. */
  tile?: W8A8TileName | SubgroupTile;
  /** Tests: the emulated builtins (ops/subgroup_matrix_emulation.ts), at this i8 config (true: 8x8x16). */
  emulate?: boolean | { M: number; N: number; K: number };
}

type Plan = { config: SubgroupMatrixConfig; sg: number } | { reason: string };

/** The i8 x i8 -> i32 config and subgroup size W8A8 would use here, or why it cannot run. */
export function w8a8Plan(e: Engine, opts: W8A8Options = {}): Plan {
  const d = e.describe();
  const [min, max] = d.subgroupSizes ?? [0, 0];
  const fixed = min && min === max ? null : `subgroup size not fixed (${min}..${max})`;
  if (opts.emulate) {
    if (!e.gpu.hasFeature('subgroups')) return { reason: `adapter ${d.name} lacks subgroups (the emulated kernel uses subgroup_id)` };
    const c = opts.emulate === true ? { M: 8, N: 8, K: 16 } : opts.emulate;
    return fixed ? { reason: fixed } : { config: { componentType: 'i8', resultComponentType: 'i32', ...c }, sg: min };
  }
  if (!e.gpu.hasFeature(SUBGROUP_MATRIX_FEATURE)) return { reason: `adapter ${d.name} lacks ${SUBGROUP_MATRIX_FEATURE}` };
  const config = d.subgroupMatrixConfigs.find(
    (c) => c.componentType === 'i8' && c.resultComponentType === 'i32' && 32 % c.M === 0 && 32 % c.N === 0 && 64 % c.K === 0,
  );
  if (!config) return { reason: `no i8 x i8 -> i32 subgroup-matrix config with M, N dividing 32 and K dividing 64 in ${JSON.stringify(d.subgroupMatrixConfigs)}` };
  return fixed ? { reason: fixed } : { config, sg: min };
}

/** Why W8A8 cannot take x (..., K) · w here (null: it can). */
export function w8a8Refusal(e: Engine, x: Tensor, w: Int8Weight, opts: W8A8Options = {}): string | null {
  const plan = w8a8Plan(e, opts);
  if ('reason' in plan) return plan.reason;
  const [N, K] = w.q.shape as [number, number];
  if (x.dtype !== 'f16') return `x ${x} is not f16`;
  if (K % 16 !== 0) return `K ${K} is not a multiple of 16`;
  if (w.q.strides[0] !== K || w.q.strides[1] !== 1 || w.q.offset % 16 !== 0) return `weight ${w.q} is not a whole contiguous (N, K) = (${N}, ${K})`;
  if (x.rank > 2 && !x.isContiguous) return `x ${x} (rank ${x.rank}) is not contiguous`;
  if (x.strides[x.rank - 1] !== 1) return `x ${x} has no unit inner stride`;
  return null;
}

const variants = new Map<string, string>();

/** The generated W8A8 kernel for a config and tile (built once per variant). */
export function w8a8Kernel(cfg: { M: number; N: number; K: number }, sg: number, tile: SubgroupTile, emulate: boolean): { shader: string; source: string } {
  const shader = `matmul_w8a8${emulate ? '_emulated' : ''}_${cfg.M}x${cfg.N}x${cfg.K}_sg${sg}_${tile.sgm}x${tile.sgn}_${tile.fm}x${tile.fn}_bk${tile.bk}_p${tile.pad}`;
  let source = variants.get(shader);
  if (source === undefined) {
    source = pipelinedGemmSource({ SM_M: cfg.M, SM_N: cfg.N, SM_K: cfg.K, SG: sg, tile, B_NK: true, VA: true, VB: true, BQ: true, AQ: true });
    if (emulate) source = emulateSubgroupMatrix(source, `${shader}.wgsl`);
    variants.set(shader, source);
  }
  return { shader, source };
}

function pickTile(t: W8A8Options['tile'], cfg: { M: number; N: number; K: number }, limit: number): SubgroupTile {
  if (typeof t === 'object') return t;
  if (t !== undefined) {
    const tile = (W8A8_TILES as Record<string, SubgroupTile>)[t];
    if (!tile) throw new RangeError(`W8A8 tile '${t}' unknown: one of ${Object.keys(W8A8_TILES).join(', ')}`);
    return tile;
  }
  const fits = (Object.values(W8A8_TILES) as SubgroupTile[]).filter((x) => x.bk % cfg.K === 0 && pipelinedTileBytes(x, cfg, 1) <= limit);
  return fits[0] ?? W8A8_TILES.w64;
}

export interface W8A8Gemm extends Epilogue {
  out?: Tensor;
}

/**
 * x (batch..., M, K) f16 · w^T with w an int8 (N, K) weight -> (batch..., M, N) f16, through W8A8. Throws with the
 * reason where w8a8Refusal has one (linear() asks first and keeps W8A16 instead).
 */
export function gemmW8A8(e: Engine, op: string, x: Tensor, w: Int8Weight, epi: W8A8Gemm = {}, opts: W8A8Options = {}): Tensor {
  const refusal = w8a8Refusal(e, x, w, opts);
  if (refusal) throw new Error(`${op}: W8A8 unavailable: ${refusal}`);
  const plan = w8a8Plan(e, opts) as { config: SubgroupMatrixConfig; sg: number };
  const cfg = plan.config;
  if (x.rank < 2 || x.rank > 5) throw new RangeError(`${op}: x${fmtShape(x.shape)} must have 2..5 dims`);
  const [N, K] = w.q.shape as [number, number];
  const M = x.shape[x.rank - 2]!;
  if (x.shape[x.rank - 1] !== K) throw new RangeError(`${op}: x${fmtShape(x.shape)} vs weight (N, K)=${fmtShape(w.q.shape)}: K differs`);
  if (w.scales.rank !== 1 || w.scales.shape[0] !== N || w.scales.dtype === 'i8') throw new RangeError(`${op}: scales ${w.scales} must be f32[${N}] or f16[${N}]`);
  const batch = x.shape.slice(0, -2);
  const nb = batch.reduce((a, b) => a * b, 1);
  if (nb > 65535) throw new RangeError(`${op}: ${nb} batches > 65535`);
  const shape = [...batch, M, N];
  const { bias, gate, residual } = epi;
  if (bias && (bias.rank !== 1 || bias.shape[0] !== N || bias.dtype !== 'f16')) throw new RangeError(`${op}: bias ${bias} must be f16[${N}]`);
  const aux = (name: string, t: Tensor | undefined): Tensor | undefined => {
    if (!t) return undefined;
    if (t.dtype !== 'f16') throw new TypeError(`${op}: ${name} ${t} must be f16`);
    const s = broadcastShapes(t.shape, shape);
    if (!s || s.length !== shape.length || s.some((n, i) => n !== shape[i])) throw new RangeError(`${op}: ${name}${fmtShape(t.shape)} does not broadcast to the output ${fmtShape(shape)}`);
    return t.expand(shape);
  };
  const g = aux('gate', gate);
  const r = aux('residual', residual);
  const limit = e.describe().limits.maxComputeWorkgroupStorageSize;
  const tile = pickTile(opts.tile, cfg, limit);
  if (tile.bk % cfg.K !== 0) throw new RangeError(`${op}: W8A8 tile bk ${tile.bk} must be a multiple of the config's K ${cfg.K}`);
  const bytes = pipelinedTileBytes(tile, cfg, 1);
  if (bytes > limit) throw new RangeError(`${op}: W8A8 tile ${JSON.stringify(tile)} needs ${bytes} B of workgroup memory, the adapter has ${limit}`);
  const out = outputTensor(e, op, shape, 'f16', epi.out, [x, w.q, w.scales, bias, gate, residual], true);

  // quantise the rows (a 2-D view of x: its rows are evenly strided, checked by w8a8Refusal), then read q as x's shape
  const x2 = x.rank === 2 ? x : x.reshape([nb * M, K]);
  const aq = quantizeActivations(e, x2);
  const a = aq.q.reshape([...batch, M, K]);
  const b = w.q.transpose().expand([...batch, K, N]);
  const pad3 = (v: readonly number[], fill = 0) => [...Array<number>(3 - v.length).fill(fill), ...v];
  const bstr = (t: Tensor | undefined) => pad3(t ? t.strides.slice(0, -2) : []);
  const mat = (t: Tensor | undefined) => (t ? [t.strides[t.rank - 2]!, t.strides[t.rank - 1]!] : [0, 0]);
  // the same Params as ops/matmul.ts's gemm (the generated kernel's struct)
  const params = new Params()
    .u32(M).u32(N).u32(K).u32(bias ? bias.strides[0]! : 0)
    .dims(pad3(batch, 1), 4)
    .dims([a.offset, b.offset, bias?.offset ?? 0, w.scales.offset], 4)
    .dims([g?.offset ?? 0, r?.offset ?? 0, w.scales.strides[0]!, out.offset], 4)
    .dims(bstr(a), 4).dims(mat(a), 4)
    .dims(bstr(b), 4).dims(mat(b), 4)
    .dims(bstr(g), 4).dims(mat(g), 4)
    .dims(bstr(r), 4).dims(mat(r), 4);
  if (!vectorReads(a, a.rank - 1, K, 16) || !vectorReads(b, b.rank - 2, K, 16)) throw new Error(`${op}: W8A8: operands not 16-int8 aligned (${a}, ${b})`);
  const { shader, source } = w8a8Kernel(cfg, plan.sg, tile, !!opts.emulate);
  const kernel = e.kernels.get({
    shader, entry: 'matmul', dtype: 'f16', source,
    constants: { ACT: ACT_CODE[epi.act ?? 'none'], BIAS: !!bias, GATE: !!g, RESID: !!r, SATURATE: true, STYPE: w.scales.dtype === 'f16' ? 1 : 0 },
  });
  e.recorder.dispatch({
    kernel,
    bindings: [out, aq.q, w.q, bias ?? aq.q, g ?? aq.q, r ?? aq.q, w.scales, aq.scales],
    params,
    workgroups: [Math.ceil(N / (tile.sgn * tile.fn * cfg.N)), Math.ceil(M / (tile.sgm * tile.fm * cfg.M)), nb],
    flops: 2 * nb * M * N * K,
    // counted with the f16 GEMMs of its shape class (a plan's rates are the f16 winners': W8A8 is opt-in, untimed)
    rate: gemmRate(M, N),
    shape: `${gemmShape(nb, M, K, N)} w8a8`,
  });
  aq.q.free();
  aq.scales.free();
  return out;
}

/** The CPU reference of gemmW8A8 before its epilogue: x (M, K) quantised as quantizeActRef does, exact integer
 * sums against q (N, K), times both scales (float64). */
export function w8a8Ref(x: ArrayLike<number>, M: number, K: number, q: Int8Array, wscales: ArrayLike<number>, N: number): Float64Array {
  const a = quantizeActRef(x, M, K);
  const y = new Float64Array(M * N);
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += a.q[m * K + k]! * q[n * K + k]!;
      y[m * N + n] = s * a.scales[m]! * wscales[n]!;
    }
  }
  return y;
}

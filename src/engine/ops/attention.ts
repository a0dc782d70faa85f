// Flash-style attention (online softmax in f32, no score matrix), grouped-query heads, causal / block-causal
// masks with a query offset for KV-cache decoding, a sliding window (local attention), and a key-length limit.
//   shader:    shaders/attention.wgsl (entry attention; overrides D, BQ, BKV, MASK); the tensor-core path
//              shaders/attention_subgroup.wgsl through ./attention_subgroup.ts (f16, opt-in)
//   reference: test/engine/reference/attention.ts
//   tests:     test/engine/attention.test.ts
import type { Engine } from '../engine';
import { Params } from '../kernels';
import { attentionShape } from '../meter';
import { fmtShape, type Tensor } from '../tensor';
import { attentionSubgroup, attentionSubgroupChoice, type AttentionSubgroupOptions, type AttentionTileName } from './attention_subgroup';
import { outputTensor } from './checks';

export type AttentionMask = 'none' | 'causal' | 'block_causal';
const MASK_CODE: Record<AttentionMask, number> = { none: 0, causal: 1, block_causal: 2 };
export const MAX_HEAD_DIM = 128;

export interface AttentionOptions {
  /** Multiplies Q·K; default 1/sqrt(D). */
  scale?: number;
  mask?: AttentionMask;
  /** Causal / block-causal: query i sits at key position i + queryOffset (cached tokens). Default 0. */
  queryOffset?: number;
  /** block_causal: f32 (P) block id per key position, P >= max(Lk, Lq + queryOffset). Any stride. */
  blockIds?: Tensor;
  /** Keys at positions >= kvLen are hidden (a padded KV cache). Default Lk. */
  kvLen?: number;
  /** Sliding window W (local attention, with any mask): query at position p sees only keys j > p - W, i.e. the
   * last W positions including its own under a causal mask (transformers' sliding_window). Default: none. */
  window?: number;
  out?: Tensor;
  /** The flash kernel's tile (implies path 'flash' under 'auto'). */
  tile?: { bq?: number; bkv?: number };
  /** 'auto' is the flash kernel, or the tensor-core one for f16 when KILN_SUBGROUP_MATRIX=1 is set, the adapter's
   * tuning table names it, or the engine's tensor-core self-test passed (tensor-cores.ts) and no table says flash
   * (and KILN_SUBGROUP_ATTENTION=0 is not set: the GEMM alone), and the adapter and head dim allow it; 'flash' /
   * 'subgroup' force one. */
  path?: 'auto' | 'flash' | 'subgroup';
  /** The tensor-core kernel's tile, and `emulate` for tests. */
  subgroup?: AttentionSubgroupOptions;
}

/** q (B, Hq, Lq, D), k and v (B, Hkv, Lk, D) -> (B, Hq, Lq, D). Hq must be a multiple of Hkv. */
export function attention(e: Engine, q: Tensor, k: Tensor, v: Tensor, opts: AttentionOptions = {}): Tensor {
  const desc = `q${fmtShape(q.shape)} k${fmtShape(k.shape)} v${fmtShape(v.shape)}`;
  if (q.dtype !== 'f32' && q.dtype !== 'f16') throw new TypeError(`attention: q ${q}: only f32 and f16`);
  if (k.dtype !== q.dtype || v.dtype !== q.dtype) throw new TypeError(`attention: q ${q}, k ${k}, v ${v}: dtypes differ`);
  if (q.rank !== 4 || k.rank !== 4 || v.rank !== 4) throw new RangeError(`attention: ${desc}: expected (B, H, L, D) each`);
  const [B, Hq, Lq, D] = q.shape as [number, number, number, number];
  const [Bk, Hkv, Lk, Dk] = k.shape as [number, number, number, number];
  if (Bk !== B || Dk !== D || v.shape.some((n, i) => n !== k.shape[i])) throw new RangeError(`attention: ${desc}: shapes do not match`);
  if (Hq % Hkv !== 0) throw new RangeError(`attention: ${desc}: Hq ${Hq} is not a multiple of Hkv ${Hkv}`);
  if (D < 1 || D > MAX_HEAD_DIM) throw new RangeError(`attention: ${desc}: head dim ${D} not in 1..${MAX_HEAD_DIM}`);
  if (Lq < 1 || Lk < 1) throw new RangeError(`attention: ${desc}: empty sequence`);
  if (B > 65535 || Hq > 65535) throw new RangeError(`attention: ${desc}: batch or heads > 65535`);
  const mask = opts.mask ?? 'none';
  const qoff = opts.queryOffset ?? 0;
  const kvLen = opts.kvLen ?? Lk;
  if (!Number.isInteger(qoff) || qoff < 0) throw new RangeError(`attention: queryOffset ${qoff} must be an integer >= 0`);
  if (!Number.isInteger(kvLen) || kvLen < 0) throw new RangeError(`attention: kvLen ${kvLen} must be an integer >= 0`);
  const window = opts.window ?? 0;
  if (opts.window !== undefined && (!Number.isInteger(window) || window < 1 || window >= 2 ** 31)) {
    throw new RangeError(`attention: window ${opts.window} must be an integer >= 1`);
  }
  const blk = opts.blockIds;
  if (mask === 'block_causal') {
    const need = Math.max(Lk, Lq + qoff);
    if (!blk || blk.dtype !== 'f32' || blk.rank !== 1 || blk.shape[0]! < need) {
      throw new RangeError(`attention: block_causal needs blockIds f32[>=${need}] for ${desc} (got ${blk ?? 'none'})`);
    }
  }
  const shape = [B, Hq, Lq, D];
  // out: any contiguous view of the output's shape at any element offset (the params' out_off)
  const out = outputTensor(e, 'attention', shape, q.dtype, opts.out, [q, k, v, blk], true);

  const params = new Params()
    .u32(Lq).u32(Lk).u32(Hq).u32(Hkv)
    .u32(q.offset).u32(k.offset).u32(v.offset).u32(kvLen)
    .u32(qoff).u32(mask === 'block_causal' ? blk!.offset : 0).u32(mask === 'block_causal' ? blk!.strides[0]! : 0).f32(opts.scale ?? 1 / Math.sqrt(D))
    .u32(window).u32(out.offset).u32(0).u32(0)
    .dims(q.strides, 4).dims(k.strides, 4).dims(v.strides, 4);
  // blk is statically used by the shader, so something is bound even when only block_causal reads it.
  const blkBinding = mask === 'block_causal' ? blk! : q;

  // Q K^T and P V over every key the kernels visit (a mask skips none of them): 2 x 2 B Hq Lq kvLen D
  const flops = 4 * B * Hq * Lq * kvLen * D;
  const label = attentionShape(B, Hq, Hkv, Lq, kvLen, D, mask);
  const path = opts.path ?? 'auto';
  // 'auto' on a tuning table's word (tuning.ts: measured at Krea 1K), unless KILN_SUBGROUP_MATRIX=0 or =1 decides
  const tuned = e.tuning.attention();
  const byTable = tuned.path === 'subgroup' && !e.settings.subgroupMatrixOff && !e.settings.subgroupMatrix;
  // or on the worker's self-test (tensor-cores.ts) where no table has a word on attention
  const bySelfTest = e.tensorCores.attention && !e.tuning.table?.attention && !e.settings.subgroupMatrixOff;
  if (path === 'subgroup' || (path === 'auto' && !opts.tile && q.dtype === 'f16' && e.settings.subgroupAttention && (e.settings.subgroupMatrix || byTable || bySelfTest))) {
    // the table's tile on 'auto' (as the GEMM's), unless the options or KILN_SUBGROUP_ATTENTION_TILE name one
    const fromTable = path === 'auto' && tuned.path === 'subgroup' && !opts.subgroup?.tile && !e.settings.subgroupAttentionTile;
    const sub = fromTable ? { ...opts.subgroup, tile: tuned.variant as AttentionTileName } : opts.subgroup;
    const choice = q.dtype === 'f16' ? attentionSubgroupChoice(e, D, sub) : { reason: `${q.dtype} (it takes f16)` };
    if ('config' in choice) {
      attentionSubgroup(e, { q, k, v, blk: blkBinding, out, params, mask: MASK_CODE[mask], B, Hq, Lq, D, flops, label }, choice, !!sub?.emulate);
      return out;
    }
    if (path === 'subgroup') throw new RangeError(`attention: ${desc}: path 'subgroup': ${choice.reason}`);
  }
  const bq = opts.tile?.bq ?? 32;
  const bkv = opts.tile?.bkv ?? 16;
  const kernel = e.kernels.get({ shader: 'attention', entry: 'attention', dtype: q.dtype, constants: { D, BQ: bq, BKV: bkv, MASK: MASK_CODE[mask] } });
  e.recorder.dispatch({ kernel, bindings: [out, q, k, v, blkBinding], params, workgroups: [Math.ceil(Lq / bq), Hq, B], flops, rate: 'attention', shape: label });
  return out;
}

// Layout ops: materialise views, write into views, concat, pad, gather rows (embedding lookup), cast.
//   shader:    shaders/layout.wgsl (entries copy, pad, gather, f32_to_f16, f16_to_f32; overrides MODE, WG)
//   reference: test/engine/reference/layout.ts
//   tests:     test/engine/layout.test.ts
// Inputs may be any strided view (rank <= 8). Outputs are new contiguous tensors unless `out` is given.
import type { Engine } from '../engine';
import type { DType } from '../dtype';
import { Params } from '../kernels';
import { grid1d } from '../recorder';
import { Tensor, fmtShape, numelOf } from '../tensor';
import { checkFloatRank, outputTensor, sameShape } from './checks';

const MAX_RANK = 8;
const WG = 256;

/** A contiguous copy of any view (permute/slice/expand materialised). */
export function copy(e: Engine, src: Tensor, out?: Tensor): Tensor {
  checkFloatRank('copy', src, MAX_RANK);
  const o = outputTensor(e, 'copy', src.shape, src.dtype, out, [src], true); // copyInto adds dst.offset
  copyInto(e, src, o);
  return o;
}

/** dst = src element by element, where dst is any view of src's shape (e.g. a slice of a bigger tensor). */
export function copyInto(e: Engine, src: Tensor, dst: Tensor): void {
  checkFloatRank('copyInto', src, MAX_RANK);
  if (dst.dtype !== src.dtype || !sameShape(dst.shape, src.shape)) throw new RangeError(`copyInto: dst ${dst} vs src ${src}: shapes or dtypes differ`);
  if (dst.storage === src.storage) throw new RangeError(`copyInto: dst ${dst} and src ${src} share storage`);
  if (dst.strides.some((s, d) => s === 0 && dst.shape[d]! > 1)) throw new RangeError(`copyInto: dst ${dst} is a broadcast view`);
  if (src.numel === 0) return;
  const kernel = e.kernels.get({ shader: 'layout', entry: 'copy', dtype: src.dtype, constants: { WG } });
  const params = base(src.numel, src.rank, src.offset, dst.offset).dims(src.shape, MAX_RANK).dims(src.strides, MAX_RANK).dims(dst.strides, MAX_RANK).dims([], MAX_RANK);
  e.recorder.dispatch({ kernel, bindings: [dst, src], params, workgroups: grid1d(src.numel, WG) });
}

/** Concatenation along `dim` (one copy dispatch per input into slices of the output). */
export function concat(e: Engine, tensors: readonly Tensor[], dim: number, out?: Tensor): Tensor {
  if (tensors.length === 0) throw new RangeError('concat: no tensors');
  const first = tensors[0]!;
  const d = dim < 0 ? dim + first.rank : dim;
  if (d < 0 || d >= first.rank) throw new RangeError(`concat: dim ${dim} out of range for ${first}`);
  for (const t of tensors) {
    checkFloatRank('concat', t, MAX_RANK);
    if (t.dtype !== first.dtype || t.rank !== first.rank || t.shape.some((n, i) => i !== d && n !== first.shape[i])) {
      throw new RangeError(`concat: ${tensors.join(', ')} differ outside dim ${d}`);
    }
  }
  const shape = [...first.shape];
  shape[d] = tensors.reduce((a, t) => a + t.shape[d]!, 0);
  const o = outputTensor(e, 'concat', shape, first.dtype, out, tensors, true); // slices of o keep its offset
  let at = 0;
  for (const t of tensors) {
    copyInto(e, t, o.slice(d, at, at + t.shape[d]!));
    at += t.shape[d]!;
  }
  return o;
}

export type PadMode = 'constant' | 'replicate' | 'reflect';
const PAD_MODE: Record<PadMode, number> = { constant: 0, replicate: 1, reflect: 2 };

/**
 * Pads x: pads[i] = [before, after] for dim rank - pads.length + i (so [[1, 1]] pads the last dim, like
 * torch's F.pad with two values). reflect needs before/after < that dim (no edge repeat, as torch).
 */
export function pad(e: Engine, x: Tensor, pads: readonly (readonly [number, number])[], mode: PadMode = 'constant', value = 0, out?: Tensor): Tensor {
  checkFloatRank('pad', x, MAX_RANK);
  if (pads.length > x.rank) throw new RangeError(`pad: ${pads.length} pad pairs for x ${x}`);
  const lead = x.rank - pads.length;
  const before = x.shape.map((_, d) => (d < lead ? 0 : pads[d - lead]![0]));
  const after = x.shape.map((_, d) => (d < lead ? 0 : pads[d - lead]![1]));
  x.shape.forEach((n, d) => {
    const [b, a] = [before[d]!, after[d]!];
    if (!Number.isInteger(b) || !Number.isInteger(a) || b < 0 || a < 0) throw new RangeError(`pad: pads [${b}, ${a}] on dim ${d} of x ${x} must be integers >= 0`);
    if (mode === 'reflect' && (b >= n || a >= n) && b + a > 0) throw new RangeError(`pad: reflect pads [${b}, ${a}] on dim ${d} of x ${x} must be < ${n}`);
    if (mode === 'replicate' && n === 0 && b + a > 0) throw new RangeError(`pad: replicate of empty dim ${d} of x ${x}`);
  });
  const shape = x.shape.map((n, d) => n + before[d]! + after[d]!);
  const o = outputTensor(e, 'pad', shape, x.dtype, out, [x], true); // dst_off
  if (o.numel === 0) return o;
  const kernel = e.kernels.get({ shader: 'layout', entry: 'pad', dtype: x.dtype, constants: { MODE: PAD_MODE[mode], WG } });
  const params = base(o.numel, x.rank, x.offset, o.offset, value).dims(shape, MAX_RANK).dims(x.strides, MAX_RANK).dims(x.shape, MAX_RANK).dims(before, MAX_RANK);
  e.recorder.dispatch({ kernel, bindings: [o, x], params, workgroups: grid1d(o.numel, WG) });
  return o;
}

/**
 * Token ids as a GPU tensor: int32 values in a 4-byte-element storage (the engine has no integer dtype yet,
 * so it is typed f32 with integer bits; only gather reads it).
 */
export function uploadIds(e: Engine, ids: ArrayLike<number>, shape: readonly number[] = [ids.length]): Tensor {
  if (numelOf(shape) !== ids.length) throw new RangeError(`uploadIds: ${ids.length} ids for shape ${fmtShape(shape)}`);
  const t = e.empty(shape, 'f32', `ids${fmtShape(shape)}`);
  if (ids.length) e.writeBytes(t, 0, new Uint8Array(Int32Array.from(ids).buffer));
  return t;
}

/** Embedding lookup: out [...ids.shape, D] = table[ids, :] for table [V, D] (any view); ids from uploadIds. */
export function gather(e: Engine, table: Tensor, ids: Tensor | ArrayLike<number>, out?: Tensor): Tensor {
  checkFloatRank('gather', table, MAX_RANK);
  if (table.rank !== 2) throw new RangeError(`gather: table ${table} must be [V, D]`);
  const own = !(ids instanceof Tensor);
  const idt = ids instanceof Tensor ? ids : uploadIds(e, ids);
  if (idt.bytesPerElement !== 4 || !idt.isContiguous) throw new RangeError(`gather: ids ${idt} must be a contiguous 4-byte id tensor (uploadIds)`);
  const [V, D] = table.shape as [number, number];
  const o = outputTensor(e, 'gather', [...idt.shape, D], table.dtype, out, [table, idt], true); // dst_str[0]: out's offset
  if (o.numel > 0) {
    const kernel = e.kernels.get({ shader: 'layout', entry: 'gather', dtype: table.dtype, constants: { WG } });
    const params = new Params().u32(o.numel).u32(2).u32(table.offset).u32(idt.offset).f32(0).u32(V).u32(D).u32(0x7fc00000).dims([], MAX_RANK).dims(table.strides, MAX_RANK).dims([o.offset], MAX_RANK).dims([], MAX_RANK);
    e.recorder.dispatch({ kernel, bindings: [o, table, idt], params, workgroups: grid1d(o.numel, WG) });
  }
  if (own) idt.free(); // ordered on the queue after the dispatch that reads it
  return o;
}

/**
 * f32 <-> f16 of any view (a same-dtype cast is a copy). f32 -> f16 rounds to nearest (WGSL allows either
 * neighbour); values outside f16's finite range are undefined in WGSL: keep them in range.
 */
export function cast(e: Engine, x: Tensor, dtype: DType, out?: Tensor): Tensor {
  checkFloatRank('cast', x, MAX_RANK);
  if (dtype !== 'f32' && dtype !== 'f16') throw new TypeError(`cast: ${x} to ${dtype}: only f32 and f16`);
  if (dtype === x.dtype) return copy(e, x, out);
  // f32 -> f16 writes packed pairs of halves as u32 words from word 0, so only f16 -> f32 takes an offset out (dst_off)
  const o = outputTensor(e, 'cast', x.shape, dtype, out, [x], dtype === 'f32');
  if (o.numel === 0) return o;
  const entry = dtype === 'f16' ? 'f32_to_f16' : 'f16_to_f32';
  const kernel = e.kernels.get({ shader: 'layout', entry, dtype: 'f32', constants: { WG } });
  const params = base(x.numel, x.rank, x.offset, o.offset).dims(x.shape, MAX_RANK).dims(x.strides, MAX_RANK).dims([], MAX_RANK).dims([], MAX_RANK);
  const threads = dtype === 'f16' ? Math.ceil(x.numel / 2) : x.numel;
  e.recorder.dispatch({ kernel, bindings: [o, x], params, workgroups: grid1d(threads, WG) });
  return o;
}

// Every entry binds the whole 160-byte Params struct: fill unused arrays with zeros.
function base(n: number, rank: number, srcOff: number, dstOff: number, value = 0): Params {
  return new Params().u32(n).u32(rank).u32(srcOff).u32(dstOff).f32(value).u32(0).u32(0).u32(0);
}


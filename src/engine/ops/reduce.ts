// Reductions over the last dim: sum, mean, max (-> dtype of x) and argmax (-> f32 indices, lowest index on
// ties). x (rows..., N) is any strided view; the result (rows...) is contiguous (shape [] for a 1-D x), a new tensor
// or `out`: a contiguous view at any element offset.
//   shader:    shaders/reduce.wgsl (entries reduce (OP), argmax; override WG)
//   reference: test/engine/reference/reduce.ts
//   tests:     test/engine/reduce.test.ts
import type { Engine } from '../engine';
import { Params } from '../kernels';
import { grid1d } from '../recorder';
import type { Tensor } from '../tensor';
import { outputTensor } from './checks';

export type ReduceOp = 'sum' | 'mean' | 'max';
const OP_CODE: Record<ReduceOp, number> = { sum: 0, mean: 1, max: 2 };
const WG = 64;
const MAX_RANK = 8;

export const sum = (e: Engine, x: Tensor, out?: Tensor) => reduce(e, 'sum', x, out);
export const mean = (e: Engine, x: Tensor, out?: Tensor) => reduce(e, 'mean', x, out);
export const reduceMax = (e: Engine, x: Tensor, out?: Tensor) => reduce(e, 'max', x, out);

export function reduce(e: Engine, op: ReduceOp, x: Tensor, out?: Tensor): Tensor {
  const o = rowOutput(e, op, x, x.dtype, out);
  const kernel = e.kernels.get({ shader: 'reduce', entry: 'reduce', dtype: x.dtype, constants: { OP: OP_CODE[op], WG } });
  e.recorder.dispatch({ kernel, bindings: [o, x], params: rowParams(x, o), workgroups: grid1d(o.numel, 1) });
  return o;
}

/** Index of the largest element of each row, as f32 (exact below 2^24). */
export function argmax(e: Engine, x: Tensor, out?: Tensor): Tensor {
  const o = rowOutput(e, 'argmax', x, 'f32', out);
  if (x.shape[x.rank - 1]! > 2 ** 24) throw new RangeError(`argmax: ${x}: rows longer than 2^24 lose index precision in f32`);
  const kernel = e.kernels.get({ shader: 'reduce', entry: 'argmax', dtype: x.dtype, constants: { WG } });
  e.recorder.dispatch({ kernel, bindings: [o, x], params: rowParams(x, o), workgroups: grid1d(o.numel, 1) });
  return o;
}

/** Params shared by reduce.wgsl and softmax.wgsl: rows, N, leading dims/strides, last-dim stride, out's offset. */
export function rowParams(x: Tensor, out: Tensor): Params {
  const lead = x.shape.slice(0, -1);
  return new Params()
    .u32(lead.reduce((a, b) => a * b, 1)).u32(x.shape[x.rank - 1]!).u32(lead.length).u32(x.offset)
    .u32(x.strides[x.rank - 1]!).u32(out.offset).u32(0).u32(0)
    .dims(lead, MAX_RANK)
    .dims(x.strides.slice(0, -1), MAX_RANK);
}

/** Checks x and returns the (rows...) output. */
export function rowOutput(e: Engine, op: string, x: Tensor, dtype: Tensor['dtype'], out: Tensor | undefined, keepLast = false): Tensor {
  if (x.dtype !== 'f32' && x.dtype !== 'f16') throw new TypeError(`${op}: ${x}: only f32 and f16 tensors`);
  if (x.rank < 1 || x.rank > MAX_RANK + 1) throw new RangeError(`${op}: ${x}: rank must be 1..${MAX_RANK + 1}`);
  if (x.shape[x.rank - 1] === 0 || x.numel === 0) throw new RangeError(`${op}: ${x}: empty rows`);
  const shape = keepLast ? [...x.shape] : x.shape.slice(0, -1);
  // out: any contiguous view of the result's shape at any element offset (rowParams passes it as out_off)
  return outputTensor(e, op, shape, dtype, out, [x], true);
}

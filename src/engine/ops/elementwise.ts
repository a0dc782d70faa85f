// Elementwise and broadcast arithmetic: the worked example every op family copies.
//   shader:    shaders/elementwise.wgsl (entries binary, scalar, copy; overrides OP, CONTIG, WG)
//   reference: test/engine/reference/elementwise.ts
//   tests:     test/engine/elementwise.test.ts
// Inputs may be any strided view (transpose, slice, expand); outputs are new contiguous tensors unless
// `out` is given (then it must be contiguous with the result's shape and dtype, and not alias an input).
import type { Engine } from '../engine';
import { Params } from '../kernels';
import { grid1d } from '../recorder';
import { broadcastShapes, fmtShape, type Tensor } from '../tensor';
import { checkFloat, outputTensor } from './checks';

export type BinaryOp = 'add' | 'sub' | 'mul' | 'div' | 'max' | 'min';
export type ScalarOp = BinaryOp | 'rsub' | 'rdiv';

const OP_CODE: Record<ScalarOp, number> = { add: 0, sub: 1, mul: 2, div: 3, rsub: 4, rdiv: 5, max: 6, min: 7 };
const MAX_RANK = 8;
const WG = 256;

export const add = (e: Engine, a: Tensor, b: Tensor | number, out?: Tensor) => arith(e, 'add', a, b, out);
export const sub = (e: Engine, a: Tensor, b: Tensor | number, out?: Tensor) => arith(e, 'sub', a, b, out);
export const mul = (e: Engine, a: Tensor, b: Tensor | number, out?: Tensor) => arith(e, 'mul', a, b, out);
export const div = (e: Engine, a: Tensor, b: Tensor | number, out?: Tensor) => arith(e, 'div', a, b, out);
export const maximum = (e: Engine, a: Tensor, b: Tensor | number, out?: Tensor) => arith(e, 'max', a, b, out);
export const minimum = (e: Engine, a: Tensor, b: Tensor | number, out?: Tensor) => arith(e, 'min', a, b, out);

/** a OP b with numpy broadcasting; a number b is a scalar operand. */
export function arith(e: Engine, op: BinaryOp, a: Tensor, b: Tensor | number, out?: Tensor): Tensor {
  return typeof b === 'number' ? scalarOp(e, op, a, b, out) : binary(e, op, a, b, out);
}

export function binary(e: Engine, op: BinaryOp, a: Tensor, b: Tensor, out?: Tensor): Tensor {
  checkFloat(op, a);
  if (a.dtype !== b.dtype) throw new TypeError(`${op}: a ${a} vs b ${b}: dtypes differ`);
  const shape = broadcastShapes(a.shape, b.shape);
  if (!shape) throw new RangeError(`${op}: a${fmtShape(a.shape)} vs b${fmtShape(b.shape)} do not broadcast`);
  checkRank(op, shape);
  const o = outputTensor(e, op, shape, a.dtype, out, [a, b], true);
  const av = a.expand(shape);
  const bv = b.expand(shape);
  const contig = sameLayout(av, shape) && sameLayout(bv, shape);
  const kernel = e.kernels.get({ shader: 'elementwise', entry: 'binary', dtype: a.dtype, constants: { OP: OP_CODE[op], CONTIG: contig, WG } });
  e.recorder.dispatch({
    kernel,
    bindings: [o, a, b],
    params: params(o, shape, av, bv, 0),
    workgroups: grid1d(o.numel, WG),
  });
  return o;
}

/** a OP s (rsub: s - a, rdiv: s / a). The scalar is passed as f32. */
export function scalarOp(e: Engine, op: ScalarOp, a: Tensor, s: number, out?: Tensor): Tensor {
  checkFloat(op, a);
  checkRank(op, a.shape);
  const o = outputTensor(e, op, a.shape, a.dtype, out, [a], true);
  const kernel = e.kernels.get({ shader: 'elementwise', entry: 'scalar', dtype: a.dtype, constants: { OP: OP_CODE[op], CONTIG: sameLayout(a, a.shape), WG } });
  e.recorder.dispatch({ kernel, bindings: [o, a], params: params(o, a.shape, a, a, s), workgroups: grid1d(o.numel, WG) });
  return o;
}

/** A contiguous copy of any view (the same tensor object is never returned: free the copy yourself). */
export function contiguous(e: Engine, a: Tensor, out?: Tensor): Tensor {
  checkFloat('contiguous', a);
  checkRank('contiguous', a.shape);
  const o = outputTensor(e, 'contiguous', a.shape, a.dtype, out, [a], true);
  const kernel = e.kernels.get({ shader: 'elementwise', entry: 'copy', dtype: a.dtype, constants: { WG } });
  e.recorder.dispatch({ kernel, bindings: [o, a], params: params(o, a.shape, a, a, 0), workgroups: grid1d(o.numel, WG) });
  return o;
}

/** out: the contiguous output (its element offset goes in out_off: out may be a view of a bigger tensor). */
function params(out: Tensor, shape: readonly number[], a: Tensor, b: Tensor, scalar: number): Params {
  // Leading size-1 dims would only cost loop iterations; rank 0 is one element with no dims.
  return new Params()
    .u32(out.numel)
    .u32(shape.length)
    .u32(a.offset)
    .u32(b.offset)
    .f32(scalar)
    .u32(out.offset)
    .dims(shape, MAX_RANK)
    .dims(a.strides, MAX_RANK)
    .dims(b.strides, MAX_RANK);
}

function sameLayout(t: Tensor, shape: readonly number[]): boolean {
  return t.isContiguous && t.shape.length === shape.length && t.shape.every((n, i) => n === shape[i]);
}

function checkRank(op: string, shape: readonly number[]): void {
  if (shape.length > MAX_RANK) throw new RangeError(`${op}: rank ${shape.length} ${fmtShape(shape)} > ${MAX_RANK}`);
}


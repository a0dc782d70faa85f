// Unary math over any strided view: out = f(clamp(x + shift, min, max)), f one of relu, sigmoid, tanh, exp, log,
// sqrt, abs, square, elu (torch.nn.ELU with its alpha) or identity (then it is a shift/clamp). The optional shift
// and clamp cover the guarded forms models use: log(max(x, 1e-5)), sqrt(max(var, 1e-12)), sqrt(x + 1e-9).
//   shader:    shaders/unary.wgsl (entry unary; overrides OP, CONTIG, CLAMP, WG)
//   reference: test/engine/reference/unary.ts
//   tests:     test/engine/unary.test.ts
// The output is a new contiguous tensor unless `out` is given (contiguous, same shape and dtype, no aliasing).
import type { Engine } from '../engine';
import { Params } from '../kernels';
import { grid1d } from '../recorder';
import { fmtShape, type Tensor } from '../tensor';
import { checkFloat, outputTensor } from './checks';

export type UnaryOp = 'identity' | 'relu' | 'sigmoid' | 'tanh' | 'exp' | 'log' | 'sqrt' | 'abs' | 'square' | 'elu';
const OP_CODE: Record<UnaryOp, number> = { identity: 0, relu: 1, sigmoid: 2, tanh: 3, exp: 4, log: 5, sqrt: 6, abs: 7, square: 8, elu: 9 };
const MAX_RANK = 8;
const WG = 256;
const F32_MAX = 3.4028234663852886e38;

export interface UnaryOptions {
  /** Added to x first (as f32). */
  shift?: number;
  /** Clamp bounds applied after the shift, before f (either side may be left open). */
  min?: number;
  max?: number;
  /** ELU's alpha (elu only; default 1 as torch.nn.ELU): x for x > 0, alpha * (exp(x) - 1) otherwise. */
  alpha?: number;
  out?: Tensor;
}

export const relu = (e: Engine, x: Tensor, o?: UnaryOptions) => unary(e, 'relu', x, o);
export const sigmoid = (e: Engine, x: Tensor, o?: UnaryOptions) => unary(e, 'sigmoid', x, o);
export const tanh = (e: Engine, x: Tensor, o?: UnaryOptions) => unary(e, 'tanh', x, o);
export const exp = (e: Engine, x: Tensor, o?: UnaryOptions) => unary(e, 'exp', x, o);
export const log = (e: Engine, x: Tensor, o?: UnaryOptions) => unary(e, 'log', x, o);
export const sqrt = (e: Engine, x: Tensor, o?: UnaryOptions) => unary(e, 'sqrt', x, o);
export const abs = (e: Engine, x: Tensor, o?: UnaryOptions) => unary(e, 'abs', x, o);
export const square = (e: Engine, x: Tensor, o?: UnaryOptions) => unary(e, 'square', x, o);
/** torch.nn.ELU(alpha): x for x > 0, alpha * (exp(x) - 1) otherwise (expm1-accurate near 0), in f32. */
export const elu = (e: Engine, x: Tensor, alpha = 1, o?: Omit<UnaryOptions, 'alpha'>) => unary(e, 'elu', x, { ...o, alpha });
/** clamp(x, min, max); either bound may be undefined. */
export const clamp = (e: Engine, x: Tensor, min?: number, max?: number, out?: Tensor) => unary(e, 'identity', x, { min, max, out });

export function unary(e: Engine, op: UnaryOp, x: Tensor, o: UnaryOptions = {}): Tensor {
  checkFloat(op, x);
  if (!(op in OP_CODE)) throw new RangeError(`unary: unknown op ${JSON.stringify(op)}`);
  if (x.rank > MAX_RANK) throw new RangeError(`${op}: rank ${x.rank} ${fmtShape(x.shape)} > ${MAX_RANK}`);
  const { shift = 0, min, max, alpha } = o;
  if (alpha !== undefined && op !== 'elu') throw new RangeError(`${op}: alpha is an elu option`);
  for (const [name, v] of [['shift', shift], ['min', min], ['max', max], ['alpha', alpha]] as const) {
    if (v !== undefined && !Number.isFinite(v)) throw new RangeError(`${op}: ${name} ${v} must be a finite number`);
  }
  if (min !== undefined && max !== undefined && min > max) throw new RangeError(`${op}: min ${min} > max ${max}`);
  const out = outputTensor(e, op, x.shape, x.dtype, o.out, [x], true); // any offset: out_off
  if (x.numel === 0) return out;
  const doClamp = min !== undefined || max !== undefined;
  const kernel = e.kernels.get({ shader: 'unary', entry: 'unary', dtype: x.dtype, constants: { OP: OP_CODE[op], CONTIG: x.isContiguous, CLAMP: doClamp, WG } });
  const params = new Params()
    .u32(x.numel).u32(x.rank).u32(x.offset).u32(out.offset)
    .f32(shift).f32(min ?? -F32_MAX).f32(max ?? F32_MAX).f32(alpha ?? 1)
    .dims(x.shape, MAX_RANK)
    .dims(x.strides, MAX_RANK);
  e.recorder.dispatch({ kernel, bindings: [out, x], params, workgroups: grid1d(x.numel, WG) });
  return out;
}

// Activations: GELU (erf / tanh), SiLU, gated units (SwiGLU, GeGLU) and BigVGAN's snake / snake-beta.
//   shader:    shaders/activation.wgsl (entries unary, glu, snake; overrides ACT, SNAKE_BETA, LOG_SCALE, WG)
//   reference: test/engine/reference/activation.ts
//   tests:     test/engine/activation.test.ts
// Inputs may be any strided view; outputs are new contiguous tensors unless `out` is given.
import type { Engine } from '../engine';
import { Params } from '../kernels';
import { grid1d } from '../recorder';
import type { Tensor } from '../tensor';
import { checkFloatRank, outputTensor, sameShape } from './checks';

export type Act = 'gelu' | 'gelu_tanh' | 'silu';
const ACT_CODE: Record<Act, number> = { gelu: 0, gelu_tanh: 1, silu: 2 };
const MAX_RANK = 8;
const WG = 256;

export const gelu = (e: Engine, x: Tensor, out?: Tensor) => activation(e, 'gelu', x, out);
export const geluTanh = (e: Engine, x: Tensor, out?: Tensor) => activation(e, 'gelu_tanh', x, out);
export const silu = (e: Engine, x: Tensor, out?: Tensor) => activation(e, 'silu', x, out);

/** out = act(x), any shape (rank <= 8). */
export function activation(e: Engine, act: Act, x: Tensor, out?: Tensor): Tensor {
  checkFloatRank(act, x, MAX_RANK);
  const o = outputTensor(e, act, x.shape, x.dtype, out, [x], true); // any offset: out_off
  const kernel = e.kernels.get({ shader: 'activation', entry: 'unary', dtype: x.dtype, constants: { ACT: ACT_CODE[act], WG } });
  e.recorder.dispatch({ kernel, bindings: [o, x], params: params(o, x, x, 0), workgroups: grid1d(o.numel, WG) });
  return o;
}

/**
 * Gated unit out = act(gate) * up (SwiGLU: 'silu', GeGLU: 'gelu' / 'gelu_tanh'). Either two tensors of the same
 * shape [..., F], or one tensor [..., 2F] whose halves are gate and up (`gateFirst`, default true: gate is the
 * first half). Returns [..., F].
 */
export function glu(e: Engine, act: Act, gate: Tensor, up?: Tensor, opts: { gateFirst?: boolean; out?: Tensor } = {}): Tensor {
  const op = act === 'silu' ? 'swiglu' : 'geglu';
  checkFloatRank(op, gate, MAX_RANK);
  let g = gate;
  let u: Tensor;
  if (up) {
    if (up.dtype !== gate.dtype) throw new TypeError(`${op}: gate ${gate} vs up ${up}: dtypes differ`);
    if (!sameShape(up.shape, gate.shape)) throw new RangeError(`${op}: gate ${gate} vs up ${up}: shapes differ`);
    u = up;
  } else {
    const f2 = gate.shape[gate.rank - 1] ?? 0;
    if (gate.rank < 1 || f2 % 2) throw new RangeError(`${op}: x ${gate} must have an even last dim (gate and up halves)`);
    const first = gate.slice(-1, 0, f2 / 2);
    const second = gate.slice(-1, f2 / 2, f2);
    [g, u] = opts.gateFirst === false ? [second, first] : [first, second];
  }
  const o = outputTensor(e, op, g.shape, g.dtype, opts.out, [gate, u], true); // any offset: out_off
  const kernel = e.kernels.get({ shader: 'activation', entry: 'glu', dtype: g.dtype, constants: { ACT: ACT_CODE[act], WG } });
  e.recorder.dispatch({ kernel, bindings: [o, g, u], params: params(o, g, u, 0), workgroups: grid1d(o.numel, WG) });
  return o;
}

export const swiglu = (e: Engine, gate: Tensor, up?: Tensor, opts?: { gateFirst?: boolean; out?: Tensor }) => glu(e, 'silu', gate, up, opts);
export const geglu = (e: Engine, gate: Tensor, up?: Tensor, opts?: { gateFirst?: boolean; out?: Tensor }) => glu(e, 'gelu', gate, up, opts);

export interface SnakeOptions {
  /** snake-beta: x + 1/beta * sin^2(alpha x); without it beta = alpha (plain snake). */
  beta?: Tensor;
  /** alpha/beta hold log values (BigVGAN's alpha_logscale): exp() them first. */
  logScale?: boolean;
  /** The channel dim of x that alpha/beta [C] index (default -1: channels-last). */
  channelDim?: number;
  out?: Tensor;
}

/** Snake activation x + 1/(beta + 1e-9) * sin^2(alpha x), alpha/beta per channel [C] (BigVGAN's formula). */
export function snake(e: Engine, x: Tensor, alpha: Tensor, o: SnakeOptions = {}): Tensor {
  const op = o.beta ? 'snakeBeta' : 'snake';
  checkFloatRank(op, x, MAX_RANK);
  const cd = (o.channelDim ?? -1) < 0 ? x.rank + (o.channelDim ?? -1) : o.channelDim!;
  if (cd < 0 || cd >= x.rank) throw new RangeError(`${op}: channel dim ${o.channelDim} out of range for x ${x}`);
  const c = x.shape[cd]!;
  for (const [name, t] of [['alpha', alpha], ['beta', o.beta]] as const) {
    if (!t) continue;
    if (t.dtype !== x.dtype) throw new TypeError(`${op}: ${name} ${t} vs x ${x}: dtypes differ`);
    if (t.rank !== 1 || t.shape[0] !== c) throw new RangeError(`${op}: ${name} ${t} must be [${c}] (dim ${cd} of x ${x})`);
  }
  const out = outputTensor(e, op, x.shape, x.dtype, o.out, [x, alpha, o.beta], true); // any offset: out_off
  const beta = o.beta ?? alpha;
  const kernel = e.kernels.get({ shader: 'activation', entry: 'snake', dtype: x.dtype, constants: { SNAKE_BETA: !!o.beta, LOG_SCALE: !!o.logScale, WG } });
  const pr = new Params()
    .u32(x.numel)
    .u32(x.rank)
    .u32(cd)
    .u32(x.offset)
    .u32(alpha.offset)
    .u32(alpha.strides[0]!)
    .u32(beta.offset)
    .u32(beta.strides[0]!)
    .dims(x.shape, MAX_RANK)
    .dims(x.strides, MAX_RANK)
    .dims([], MAX_RANK)
    .u32(out.offset);
  e.recorder.dispatch({ kernel, bindings: [out, x, alpha, beta], params: pr, workgroups: grid1d(x.numel, WG) });
  return out;
}

/** out: the contiguous output, whose element offset goes in out_off (it may be a view of a bigger tensor). */
function params(out: Tensor, a: Tensor, b: Tensor, cdim: number): Params {
  return new Params()
    .u32(out.numel)
    .u32(a.rank)
    .u32(cdim)
    .u32(a.offset)
    .u32(b.offset)
    .u32(0)
    .u32(0)
    .u32(0)
    .dims(a.shape, MAX_RANK)
    .dims(a.strides, MAX_RANK)
    .dims(b.strides, MAX_RANK)
    .u32(out.offset);
}


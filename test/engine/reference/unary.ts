// CPU reference for shaders/unary.wgsl: float64, logical row-major host arrays.
import type { UnaryOp } from '../../../src/engine/ops/unary';
import type { HostTensor } from '../helpers';

export function unaryFnRef(op: UnaryOp, v: number, alpha = 1): number {
  switch (op) {
    case 'identity': return v;
    case 'relu': return Math.max(v, 0);
    case 'sigmoid': return 1 / (1 + Math.exp(-v));
    case 'tanh': return Math.tanh(v);
    case 'exp': return Math.exp(v);
    case 'log': return Math.log(v);
    case 'sqrt': return Math.sqrt(v);
    case 'abs': return Math.abs(v);
    case 'square': return v * v;
    case 'elu': return v > 0 ? v : alpha * Math.expm1(v);
  }
}

/** out = f(clamp(x + shift, min, max)); the clamp only on the sides given; alpha is ELU's (default 1). */
export function unaryRef(op: UnaryOp, x: HostTensor, o: { shift?: number; min?: number; max?: number; alpha?: number } = {}): HostTensor {
  const data = x.data.map((v) => {
    let u = v + (o.shift ?? 0);
    if (o.min !== undefined) u = Math.max(u, o.min);
    if (o.max !== undefined) u = Math.min(u, o.max);
    return unaryFnRef(op, u, o.alpha ?? 1);
  });
  return { data, shape: [...x.shape] };
}

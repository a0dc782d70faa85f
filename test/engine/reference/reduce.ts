// CPU references for shaders/reduce.wgsl and shaders/softmax.wgsl: float64 over the last dim of logical
// row-major data.
import type { ReduceOp } from '../../../src/engine/ops/reduce';
import type { HostTensor } from '../helpers';

function rows(x: HostTensor, f: (row: Float64Array) => number): HostTensor {
  const N = x.shape[x.shape.length - 1]!;
  const R = x.data.length / N;
  const out = new Float64Array(R);
  for (let r = 0; r < R; r++) out[r] = f(x.data.subarray(r * N, (r + 1) * N));
  return { data: out, shape: x.shape.slice(0, -1) };
}

export function reduceRef(op: ReduceOp, x: HostTensor): HostTensor {
  return rows(x, (row) => {
    if (op === 'max') return row.reduce((a, b) => Math.max(a, b), -Infinity);
    const s = row.reduce((a, b) => a + b, 0);
    return op === 'mean' ? s / row.length : s;
  });
}

/** Lowest index of the maximum. */
export function argmaxRef(x: HostTensor): HostTensor {
  return rows(x, (row) => {
    let bi = 0;
    for (let i = 1; i < row.length; i++) if (row[i]! > row[bi]!) bi = i;
    return bi;
  });
}

export function softmaxRef(x: HostTensor): HostTensor {
  const N = x.shape[x.shape.length - 1]!;
  const out = new Float64Array(x.data.length);
  for (let r = 0; r < x.data.length / N; r++) {
    const row = x.data.subarray(r * N, (r + 1) * N);
    const m = row.reduce((a, b) => Math.max(a, b), -Infinity);
    let s = 0;
    for (const v of row) s += Math.exp(v - m);
    for (let i = 0; i < N; i++) out[r * N + i] = Math.exp(row[i]! - m) / s;
  }
  return { data: out, shape: [...x.shape] };
}

// CPU reference for shaders/matmul.wgsl (matmul, linear, int8 linear): float64, logical row-major inputs,
// numpy batch broadcasting. erf is computed independently of the shader's approximation (series / continued
// fraction, ~1e-14).
import { broadcastShapes, fmtShape, numelOf } from '../../../src/engine/tensor';
import type { Activation } from '../../../src/engine/ops/matmul';
import type { HostTensor } from '../helpers';
import { broadcastIndex } from './elementwise';

export interface EpilogueRef {
  bias?: HostTensor;
  act?: Activation;
  gate?: HostTensor;
  residual?: HostTensor;
}

/** a (batch..., M, K) · b (batch..., K, N) then the epilogue: y = act(ab + bias); y *= gate; y += residual. */
export function matmulRef(a: HostTensor, b: HostTensor, epi: EpilogueRef = {}): HostTensor {
  const [M, K] = a.shape.slice(-2) as [number, number];
  const N = b.shape[b.shape.length - 1]!;
  const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2));
  if (!batch || b.shape[b.shape.length - 2] !== K) throw new Error(`matmulRef: ${fmtShape(a.shape)} · ${fmtShape(b.shape)}`);
  const shape = [...batch, M, N];
  const nb = numelOf(batch);
  const ai = broadcastIndex(a.shape.slice(0, -2), batch);
  const bi = broadcastIndex(b.shape.slice(0, -2), batch);
  const out = new Float64Array(numelOf(shape));
  for (let z = 0; z < nb; z++) {
    const ao = ai(z) * M * K;
    const bo = bi(z) * K * N;
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += a.data[ao + m * K + k]! * b.data[bo + k * N + n]!;
        out[(z * M + m) * N + n] = s;
      }
    }
  }
  const gi = epi.gate && broadcastIndex(epi.gate.shape, shape);
  const ri = epi.residual && broadcastIndex(epi.residual.shape, shape);
  for (let i = 0; i < out.length; i++) {
    let y = out[i]! + (epi.bias ? epi.bias.data[i % N]! : 0);
    y = actRef(epi.act ?? 'none', y);
    if (gi) y *= epi.gate!.data[gi(i)]!;
    if (ri) y += epi.residual!.data[ri(i)]!;
    out[i] = y;
  }
  return { data: out, shape };
}

/** x (..., K) · W^T with W (N, K). */
export function linearRef(x: HostTensor, w: HostTensor, epi: EpilogueRef = {}): HostTensor {
  const [N, K] = w.shape as [number, number];
  const wt = new Float64Array(N * K);
  for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) wt[k * N + n] = w.data[n * K + k]!;
  const x2 = x.shape.length === 1 ? { data: x.data, shape: [1, K] } : x;
  const y = matmulRef(x2, { data: wt, shape: [K, N] }, epi);
  return x.shape.length === 1 ? { data: y.data, shape: [N] } : y;
}

export function actRef(act: Activation, x: number): number {
  switch (act) {
    case 'none': return x;
    case 'gelu_tanh': return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
    case 'gelu_erf': return 0.5 * x * (1 + erfRef(x / Math.SQRT2));
    case 'silu': return x / (1 + Math.exp(-x));
  }
}

/** erf in float64: Maclaurin series for |x| < 2.5, Lentz-free continued fraction for erfc beyond. */
export function erfRef(x: number): number {
  const ax = Math.abs(x);
  if (ax < 2.5) {
    let term = ax;
    let sum = ax;
    for (let n = 1; n < 200 && Math.abs(term) > 1e-17 * Math.abs(sum); n++) {
      term *= (-ax * ax) / n;
      sum += term / (2 * n + 1);
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }
  // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), evaluated from the tail
  let f = ax;
  for (let n = 80; n >= 1; n--) f = ax + n / 2 / f;
  const erfc = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / f;
  return Math.sign(x) * (1 - erfc);
}
